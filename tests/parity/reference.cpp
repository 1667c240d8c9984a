// Decoding and rounding written independently of core/half.h and core/quant.h, so the harness
// checks the library's conversions instead of repeating them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "tests/parity/parity.h"

namespace edgelm::parity {
namespace {

double half_bits_to_double(uint16_t bits) {
  const int sign = bits >> 15;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  double magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -24);
  } else if (exponent == 31) {
    magnitude = mantissa != 0 ? std::numeric_limits<double>::quiet_NaN()
                              : std::numeric_limits<double>::infinity();
  } else {
    magnitude = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

double bf16_bits_to_double(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

// Position of the record for block `block` of row group `group` in a Q4_0x8 / Q8_0x8 matrix: the
// records come in K segments of `per_segment` blocks (the last one shorter), each holding every
// group's blocks of that segment, group after group.
int64_t x8_record(int64_t groups, int64_t blocks, int64_t per_segment, int64_t group,
                  int64_t block) {
  const int64_t segment = block / per_segment;
  const int64_t before = segment * per_segment * groups;  // records of the earlier segments
  const int64_t in_segment = std::min(per_segment, blocks - segment * per_segment);
  return before + group * in_segment + block % per_segment;
}

// Rounds |x| to a multiple of `quantum` (a power of two), ties to even.
double round_to_quantum(double x, double quantum) {
  return std::copysign(std::nearbyint(std::fabs(x) / quantum) * quantum, x);
}

}  // namespace

std::vector<double> decode_bytes(DType dtype, const uint8_t* bytes, Shape shape) {
  const int64_t numel = shape.numel();
  std::vector<double> out(static_cast<size_t>(numel));
  switch (dtype) {
    case DType::F32:
      for (int64_t i = 0; i < numel; ++i) {
        float value;
        std::memcpy(&value, bytes + 4 * i, 4);
        out[i] = value;
      }
      break;
    case DType::I32:
      for (int64_t i = 0; i < numel; ++i) {
        int32_t value;
        std::memcpy(&value, bytes + 4 * i, 4);
        out[i] = value;
      }
      break;
    case DType::F16:
      for (int64_t i = 0; i < numel; ++i) out[i] = half_bits_to_double(load_u16(bytes + 2 * i));
      break;
    case DType::BF16:
      for (int64_t i = 0; i < numel; ++i) out[i] = bf16_bits_to_double(load_u16(bytes + 2 * i));
      break;
    case DType::Q8_0:  // blocks of 34 bytes: half scale, 32 int8
      for (int64_t i = 0; i < numel; ++i) {
        const uint8_t* block = bytes + 34 * (i / 32);
        out[i] = half_bits_to_double(load_u16(block)) * static_cast<int8_t>(block[2 + i % 32]);
      }
      break;
    case DType::Q4_0:  // blocks of 18 bytes: half scale, 16 bytes; element j<16 low nibble of j
      for (int64_t i = 0; i < numel; ++i) {
        const uint8_t* block = bytes + 18 * (i / 32);
        const int j = static_cast<int>(i % 32);
        const int nibble = j < 16 ? (block[2 + j] & 0x0f) : (block[2 + j - 16] >> 4);
        out[i] = half_bits_to_double(load_u16(block)) * (nibble - 8);
      }
      break;
    case DType::Q4_1:  // blocks of 20 bytes: half d, half m, 16 bytes of nibbles as Q4_0
      for (int64_t i = 0; i < numel; ++i) {
        const uint8_t* block = bytes + 20 * (i / 32);
        const int j = static_cast<int>(i % 32);
        const int nibble = j < 16 ? (block[4 + j] & 0x0f) : (block[4 + j - 16] >> 4);
        out[i] = half_bits_to_double(load_u16(block)) * nibble +
                 half_bits_to_double(load_u16(block + 2));
      }
      break;
    case DType::Q5_0:  // blocks of 22 bytes: half d, 4 bytes of fifth bits, 16 bytes of nibbles
    case DType::Q5_1:  // blocks of 24 bytes: half d, half m, then as Q5_0
      for (int64_t i = 0; i < numel; ++i) {
        const bool offset = dtype == DType::Q5_1;
        const uint8_t* block = bytes + (offset ? 24 : 22) * (i / 32);
        const uint8_t* high_bits = block + (offset ? 4 : 2);
        const uint8_t* nibbles = high_bits + 4;
        const int j = static_cast<int>(i % 32);
        const int nibble = j < 16 ? (nibbles[j] & 0x0f) : (nibbles[j - 16] >> 4);
        const int q = nibble + 16 * ((high_bits[j / 8] >> (j % 8)) & 1);
        const double d = half_bits_to_double(load_u16(block));
        out[i] = offset ? d * q + half_bits_to_double(load_u16(block + 2)) : d * (q - 16);
      }
      break;
    case DType::Q4_0x8: {  // records of 8 rows x 32 elements: 8 half scales, [4][8][4] bytes
      const int64_t K = shape.last();
      for (int64_t i = 0; i < numel; ++i) {
        const int64_t row = i / K;
        const int64_t k = i % K;
        const uint8_t* record =
            bytes + 144 * x8_record(shape.rows() / 8, K / 32, 64, row / 8, k / 32);
        const int64_t r = row % 8;
        const int j = static_cast<int>(k % 32) % 16;
        const uint8_t byte = record[16 + (j / 4 * 8 + r) * 4 + j % 4];
        const int nibble = k % 32 < 16 ? (byte & 0x0f) : (byte >> 4);
        out[i] = half_bits_to_double(load_u16(record + 2 * r)) * (nibble - 8);
      }
      break;
    }
    case DType::F16x4: {  // chunks of 4 rows x 16 halves, in K segments (below)
      const int64_t K = shape.last();
      for (int64_t i = 0; i < numel; ++i) {
        const int64_t row = i / K;
        const int64_t k = i % K;
        // Columns in segments of 2048; a segment holds every group's chunks of it in turn.
        const int64_t segment_start = k / 2048 * 2048;
        const int64_t segment_chunks = std::min<int64_t>(2048, K - segment_start) / 16;
        const int64_t chunk = shape.rows() * segment_start / 64 + (row / 4) * segment_chunks +
                              (k - segment_start) / 16;
        out[i] = half_bits_to_double(load_u16(bytes + 2 * ((chunk * 4 + row % 4) * 16 + k % 16)));
      }
      break;
    }
    case DType::Q8_0x8: {  // records of 8 rows x 32 elements: 8 half scales, [8][8][4] bytes
      const int64_t K = shape.last();
      for (int64_t i = 0; i < numel; ++i) {
        const int64_t row = i / K;
        const int64_t k = i % K;
        const uint8_t* record =
            bytes + 272 * x8_record(shape.rows() / 8, K / 32, 64, row / 8, k / 32);
        const int64_t r = row % 8;
        const int j = static_cast<int>(k % 32);
        const auto value = static_cast<int8_t>(record[16 + (j / 4 * 8 + r) * 4 + j % 4]);
        out[i] = half_bits_to_double(load_u16(record + 2 * r)) * value;
      }
      break;
    }
    case DType::Q4_K:  // super-blocks of 256 in 144 bytes: d, dmin, 12 scale bytes, 128 nibbles
    case DType::Q5_K:  // 176 bytes: d, dmin, 12 scale bytes, 32 bytes of fifth bits, 128 nibbles
      for (int64_t i = 0; i < numel; ++i) {
        const bool five = dtype == DType::Q5_K;
        const uint8_t* block = bytes + (five ? 176 : 144) * (i / 256);
        const uint8_t* sc = block + 4;
        const uint8_t* qh = block + 16;
        const uint8_t* qs = block + (five ? 48 : 16);
        const int j = static_cast<int>(i % 256), s = j / 32, l = j % 32;
        // 6-bit scale and min of sub-block s: bytes s and s + 4 for s < 4; for s >= 4 the nibbles
        // of byte s + 4, topped by the two high bits of bytes s - 4 and s.
        const int scale = s < 4 ? sc[s] & 63 : (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
        const int min = s < 4 ? sc[s + 4] & 63 : (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
        int q = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 15;
        if (five) q |= ((qh[l] >> s) & 1) << 4;
        out[i] = half_bits_to_double(load_u16(block)) * scale * q -
                 half_bits_to_double(load_u16(block + 2)) * min;
      }
      break;
    case DType::Q6_K:  // 210 bytes: 128 low-nibble bytes, 64 bytes of 2-bit pairs, 16 int8, d
      for (int64_t i = 0; i < numel; ++i) {
        const uint8_t* block = bytes + 210 * (i / 256);
        const int j = static_cast<int>(i % 256), h = j / 128, k = (j % 128) / 32, l = j % 32;
        const int low = (block[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 15;
        const int high = (block[128 + 32 * h + l] >> (2 * k)) & 3;
        const auto scale = static_cast<int8_t>(block[192 + j / 16]);
        out[i] = half_bits_to_double(load_u16(block + 208)) * scale * ((low | high << 4) - 32);
      }
      break;
    case DType::Q4_Kx8:    // records of 8 rows x 256: d[8], dmin[8], [3][8][4] scale, [32][8][4] qs
    case DType::Q6_Kx8: {  // [16 steps][ql, ql, qh][8][4], [16][8] scales, d[8] (below)
      const bool four = dtype == DType::Q4_Kx8;
      const int64_t K = shape.last(), blocks = K / 256, rows = shape.rows();
      const size_t block_bytes = four ? 144 : 210;
      // Each row's super-blocks gathered back into the stored layout, then decoded as stored.
      std::vector<uint8_t> stored(static_cast<size_t>(rows * blocks) * block_bytes);
      for (int64_t row = 0; row < rows; ++row) {
        for (int64_t b = 0; b < blocks; ++b) {
          const uint8_t* record =
              bytes + 8 * block_bytes * x8_record(rows / 8, blocks, 8, row / 8, b);
          uint8_t* block = stored.data() + (row * blocks + b) * block_bytes;
          const int64_t r = row % 8;
          // Byte i of a field of `length` bytes at `offset`, in chunks of `chunk` bytes, chunk j
          // of the eight rows at place(j) in the record.
          auto gather = [&](size_t offset, size_t length, size_t chunk, auto place) {
            for (size_t i = 0; i < length; ++i)
              block[offset + i] = record[place(i / chunk) + r * chunk + i % chunk];
          };
          if (four) {
            gather(0, 2, 2, [](size_t) { return 0; });                  // d
            gather(2, 2, 2, [](size_t) { return 16; });                 // dmin
            gather(4, 12, 4, [](size_t j) { return 32 + 32 * j; });     // scales
            gather(16, 128, 4, [](size_t j) { return 128 + 32 * j; });  // qs
          } else {
            // ql byte 64h + 32i + l and qh byte 32h + l (l = 4c + ...) in step 8h + c of 96 bytes.
            gather(0, 128, 4,
                   [](size_t j) { return 96 * (8 * (j / 16) + j % 8) + 32 * (j / 8 % 2); });
            gather(128, 64, 4, [](size_t j) { return 96 * j + 64; });   // qh
            gather(192, 16, 1, [](size_t j) { return 1536 + 8 * j; });  // scales
            gather(208, 2, 2, [](size_t) { return 1664; });             // d
          }
        }
      }
      return decode_bytes(four ? DType::Q4_K : DType::Q6_K, stored.data(), shape);
    }
    case DType::Count:
      EDGELM_FAIL("[parity] cannot decode dtype Count");
  }
  return out;
}

std::vector<double> decode(const Tensor& tensor) {
  EDGELM_CHECK(tensor.raw() != nullptr, "[parity] ", tensor.describe(), " has no host mapping");
  return decode_bytes(tensor.dtype(), static_cast<const uint8_t*>(tensor.raw()), tensor.shape());
}

double round_to_f16(double x) {
  if (std::isnan(x) || std::isinf(x) || x == 0.0) return x;
  int exponent;
  std::frexp(std::fabs(x), &exponent);  // |x| = m · 2^exponent, m in [0.5, 1)
  const double quantum =
      std::fabs(x) < std::ldexp(1.0, -14) ? std::ldexp(1.0, -24) : std::ldexp(1.0, exponent - 11);
  const double rounded = round_to_quantum(x, quantum);
  if (std::fabs(rounded) > 65504.0)
    return std::copysign(std::numeric_limits<double>::infinity(), x);
  return rounded;
}

double round_to_bf16(double x) {
  if (std::isnan(x) || std::isinf(x) || x == 0.0) return x;
  int exponent;
  std::frexp(std::fabs(x), &exponent);
  const double quantum =
      std::fabs(x) < std::ldexp(1.0, -126) ? std::ldexp(1.0, -133) : std::ldexp(1.0, exponent - 8);
  const double rounded = round_to_quantum(x, quantum);
  const double largest = std::ldexp(255.0, 120);  // (2 - 2^-7) · 2^127
  if (std::fabs(rounded) > largest)
    return std::copysign(std::numeric_limits<double>::infinity(), x);
  return rounded;
}

}  // namespace edgelm::parity
