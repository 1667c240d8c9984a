// The KV cache's element types as the attention kernels read them (F32Cache, F16Cache), written
// once over the vector contract `Vec`:
//   Element                     the cache's element type
//   load(p)                     Vec::kLanes consecutive elements as floats
//   value(p)                    one element as a float
//   row(cache, offset, n, buf)  the row of n elements at `offset` as floats: the row itself for
//                               F32, else converted into `buf` (the attention kernels pass a row
//                               of their float panel, so the conversion is the only copy)
// The conversion from F16 is exact, so every ISA reads the same values.
//
// Textual header: include it inside the instruction set's own anonymous namespace after its
// contract (see simd/vec_avx2.h).

struct F32Cache {
  using Element = float;
  static typename Vec::Reg load(const float* p) { return Vec::load(p); }
  static float value(const float* p) { return *p; }
  static const float* row(const void* cache, int64_t offset, int64_t /*n*/, float* /*buffer*/) {
    return static_cast<const float*>(cache) + offset;
  }
};

struct F16Cache {
  using Element = uint16_t;
  static typename Vec::Reg load(const uint16_t* p) { return Vec::load_f16(p); }
  static float value(const uint16_t* p) { return Vec::half_to_float(*p); }
  static const float* row(const void* cache, int64_t offset, int64_t n, float* buffer) {
    const uint16_t* half = static_cast<const uint16_t*>(cache) + offset;
    int64_t i = 0;
    for (; i + Vec::kLanes <= n; i += Vec::kLanes) Vec::store(buffer + i, Vec::load_f16(half + i));
    for (; i < n; ++i) buffer[i] = Vec::half_to_float(half[i]);
    return buffer;
  }
};
