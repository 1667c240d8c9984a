// Parity cases of the ops that read weight matrices: embed (a row lookup in every stored type
// and load-time layout) and matmul (every weight type and layout, SIMD tile boundaries, K past
// one segment, non-finite and tiny activations).
#include <optional>

#include "tests/parity/cases.h"

namespace edgelm::parity {

namespace {

const std::vector<DType> kWeightTypes = {DType::F32,  DType::F16,  DType::BF16,
                                         DType::Q8_0, DType::Q4_0, DType::Q4_1,
                                         DType::Q5_0, DType::Q5_1, DType::I32};

struct MatmulShape {
  int64_t M, N, K;
};

// x · Wᵀ against the double-precision product. With `spoil`, x holds NaN, infinities and blocks
// too small to scale (spoiled_rows, starting at that pattern; the name gets `what`): every product
// with a non-finite value must be non-finite (the harness requires finiteness to agree), never an
// arbitrary finite number, which is what rounding such x to 8 bits once gave; the tiny blocks
// contribute ~1e-38, so their rows match the reference within the usual tolerance.
void add_matmul_case(std::vector<OpCase>& cases, DType dtype, MatmulShape s,
                     std::optional<Spoil> spoil = std::nullopt, const char* what = "") {
  const double tolerance = dtype_is_quantized(dtype) ? kQuantizedActivations : kFloatMath;
  const std::string shape = dims({{"M", s.M}, {"N", s.N}, {"K", s.K}});
  cases.push_back({OpKind::Matmul,
                   {dtype},
                   spoil ? shape + "_" + what : shape,
                   tolerance,
                   [=](Context& ctx) {
                     Tensor x = spoil ? ctx.values(DType::F32, {s.M, s.K},
                                                   spoiled_rows(ctx.rng(), s.M, s.K, *spoil))
                                      : ctx.random(DType::F32, {s.M, s.K});
                     Tensor w = ctx.random(dtype, {s.N, s.K}, 0.5f);
                     Tensor y = ctx.output(DType::F32, {s.M, s.N});
                     ctx.backend().matmul(x, w, y);
                     ctx.compare(y);
                   },
                   [=](const Context& ctx) {
                     const auto x = ctx.input(0);
                     const auto w = ctx.input(1);
                     std::vector<double> y(static_cast<size_t>(s.M * s.N));
                     for (int64_t m = 0; m < s.M; ++m) {
                       for (int64_t n = 0; n < s.N; ++n) {
                         double sum = 0.0;
                         for (int64_t k = 0; k < s.K; ++k) sum += x[m * s.K + k] * w[n * s.K + k];
                         y[m * s.N + n] = sum;
                       }
                     }
                     return Expected{y};
                   }});
}

}  // namespace

void embed_cases(std::vector<OpCase>& cases) {
  struct S {
    int64_t vocab, dim, n;
  };
  // The stored types, then the CPU's load-time layouts (a tied output matrix repacked for matmul
  // is also the embedding table): whole row groups, and rows past one K segment of each layout.
  std::vector<std::pair<DType, std::vector<S>>> tables;
  for (DType dtype : kWeightTypes)
    tables.push_back({dtype, {S{7, 32, 1}, S{50, 96, 5}, S{33, 256, 17}}});
  for (DType dtype : {DType::Q4_0x8, DType::Q8_0x8, DType::F16x4})
    tables.push_back({dtype, {S{8, 32, 1}, S{48, 96, 9}, S{24, 4160, 5}}});
  for (DType dtype : {DType::Q4_K, DType::Q5_K, DType::Q6_K})
    tables.push_back({dtype, {S{7, 256, 1}, S{50, 512, 5}, S{33, 1536, 17}}});
  for (DType dtype : {DType::Q4_Kx8, DType::Q6_Kx8})
    tables.push_back({dtype, {S{8, 256, 1}, S{48, 512, 9}, S{24, 2304, 5}}});
  for (const auto& [stored, sizes] : tables) {
    const DType dtype = stored;  // a structured binding cannot be captured in C++20 by Clang 14
    for (S s : sizes) {
      cases.push_back({OpKind::Embed,
                       {dtype},
                       dims({{"vocab", s.vocab}, {"dim", s.dim}, {"n", s.n}}),
                       0.0,  // decoding is exact in float32
                       [=](Context& ctx) {
                         Tensor table = ctx.random(dtype, {s.vocab, s.dim});
                         std::vector<double> ids(static_cast<size_t>(s.n));
                         for (double& id : ids) id = uniform_int(ctx.rng(), 0, s.vocab - 1);
                         Tensor id_tensor = ctx.values(DType::I32, {s.n}, ids);
                         Tensor out = ctx.output(DType::F32, {s.n, s.dim});
                         ctx.backend().embed(table, id_tensor, out);
                         ctx.compare(out);
                       },
                       [=](const Context& ctx) {
                         const auto table = ctx.input(0);
                         const auto ids = ctx.input(1);
                         std::vector<double> out;
                         for (double id : ids) {
                           for (int64_t d = 0; d < s.dim; ++d) {
                             out.push_back(table[static_cast<size_t>(id) * s.dim + d]);
                           }
                         }
                         return Expected{out};
                       }});
    }
  }
}

void matmul_cases(std::vector<OpCase>& cases) {
  for (DType dtype : kWeightTypes) {
    for (MatmulShape s :
         {MatmulShape{1, 1, 32}, MatmulShape{1, 17, 96}, MatmulShape{5, 7, 64},
          MatmulShape{4, 33, 288}, MatmulShape{17, 16, 160}, MatmulShape{33, 65, 256},
          MatmulShape{1, 15, 1024}, MatmulShape{6, 50, 2080}}) {
      add_matmul_case(cases, dtype, s);
    }
  }
  // The tiled GEMM path of OpenCL (8 rows of x and more; CLBlast or the backend's own 64 x 64
  // tiles with a K step of 16, EDGELM_CL_GEMM chooses): its first M, then one tile and one row
  // and column past it, in several K steps.
  for (DType dtype : kWeightTypes) {
    for (MatmulShape s : {MatmulShape{8, 9, 32}, MatmulShape{65, 66, 96}}) {
      add_matmul_case(cases, dtype, s);
    }
  }
  // Float weights take any K: one that is no multiple of 8, past the float GEMM's K slices (1024
  // elements in the AVX2 kernel), with an M tail and an N tail.
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    add_matmul_case(cases, dtype, MatmulShape{5, 13, 1091});
    // The same on the GEMM path: K ends inside a K step of the OpenCL GEMM tiles.
    add_matmul_case(cases, dtype, MatmulShape{64, 63, 45});
  }
  // Q4_0x8 and Q8_0x8 hold whole groups of eight rows: N = 8, 16, 24, 40, 64 (one to eight
  // groups, split between threads on group boundaries), with the same M tails and K lengths as
  // above, and K past one segment (2048 values for both layouts): 2080 and 4160 end in
  // a short segment, 8192 is Llama-3.2-1B's down projection. 1032 rows (129 groups) are enough for
  // the CPU backend to pair the two halves for the x86 decode kernels (KernelTable::decode_pairs,
  // x86.h: kMinPairDistanceBytes), an odd group left alone.
  for (DType dtype : {DType::Q4_0x8, DType::Q8_0x8}) {
    for (MatmulShape s :
         {MatmulShape{1, 8, 32}, MatmulShape{1, 16, 96}, MatmulShape{5, 24, 64},
          MatmulShape{4, 32, 288}, MatmulShape{17, 16, 160}, MatmulShape{33, 64, 256},
          MatmulShape{1, 64, 1024}, MatmulShape{3, 24, 2080}, MatmulShape{1, 16, 4160},
          MatmulShape{5, 24, 4160}, MatmulShape{1, 16, 8192}, MatmulShape{1, 24, 96},
          MatmulShape{1, 40, 4160}, MatmulShape{1, 1032, 2048}}) {
      add_matmul_case(cases, dtype, s);
    }
  }
  // F16x4 holds whole groups of four rows and whole chunks of 16 columns: one to eighteen groups,
  // M tails, and K from one chunk to the 8192 of Llama-3.2-1B's down projection, past one K
  // segment (2048 columns): 2064 and 4112 end in a one-chunk segment, and 72 rows at 8192 are more
  // groups than the decode kernels take per batch; 140 rows (35 groups) are more than a batch of
  // pairs, and 1028 rows are enough for the CPU backend to pair the two halves for the AVX-512
  // decode kernel (KernelTable::decode_pairs, x86.h: kMinPairDistanceBytes).
  for (MatmulShape s : {MatmulShape{1, 4, 16}, MatmulShape{1, 20, 96}, MatmulShape{5, 12, 64},
                        MatmulShape{4, 32, 288}, MatmulShape{17, 16, 160}, MatmulShape{33, 64, 256},
                        MatmulShape{1, 64, 1024}, MatmulShape{2, 8, 8192}, MatmulShape{1, 20, 2064},
                        MatmulShape{7, 12, 4112}, MatmulShape{1, 72, 8192},
                        MatmulShape{1, 140, 2064}, MatmulShape{1, 1028, 2048}}) {
    add_matmul_case(cases, DType::F16x4, s);
  }
  // The K-quants' super-blocks of 256: one, several, the 1536 of SmolLM2's down projection and
  // the 8192 of Llama-3.2-1B's, with M tails (decode, bands of 4 and 3 rows of x) and odd N.
  for (DType dtype : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    for (MatmulShape s :
         {MatmulShape{1, 1, 256}, MatmulShape{1, 17, 512}, MatmulShape{5, 7, 768},
          MatmulShape{4, 33, 256}, MatmulShape{17, 16, 1536}, MatmulShape{33, 9, 512},
          MatmulShape{1, 15, 8192}, MatmulShape{8, 9, 256}, MatmulShape{65, 66, 512}}) {
      add_matmul_case(cases, dtype, s);
    }
    add_matmul_case(cases, dtype, {1, 16, 256}, Spoil::kNaN, "nan");
    add_matmul_case(cases, dtype, {1, 16, 512}, Spoil::kTinyBlock, "tiny");
    add_matmul_case(cases, dtype, {5, 24, 768}, Spoil::kNaN, "spoiled");
    add_matmul_case(cases, dtype, {17, 16, 256}, Spoil::kPositiveInf, "spoiled");
  }
  // The sub-block types' prefill (3 rows of x and more) unpacks chunks of about 64-128 KiB of
  // weight rows into panels of 8 or 16 interleaved rows (simd/block_matmul.h): weights of several
  // chunks, the last one ending inside a panel.
  for (DType dtype : {DType::Q4_1, DType::Q5_0, DType::Q5_1})
    add_matmul_case(cases, dtype, MatmulShape{5, 200, 2080});
  // Their decode (1 or 2 rows of x) sums eight blocks a step on x86: 9 and 65 blocks (steps and a
  // one-block tail), and two rows with non-finite and tiny x, most likely inside a step (17
  // blocks).
  for (DType dtype : {DType::Q4_1, DType::Q5_0, DType::Q5_1}) {
    add_matmul_case(cases, dtype, MatmulShape{1, 9, 288});
    add_matmul_case(cases, dtype, MatmulShape{2, 13, 2080});
    add_matmul_case(cases, dtype, {2, 16, 544}, Spoil::kNaN, "spoiled");
    add_matmul_case(cases, dtype, {2, 16, 544}, Spoil::kNegativeInf, "inf");
  }
  for (DType dtype : {DType::Q4_K, DType::Q5_K, DType::Q6_K})
    add_matmul_case(cases, dtype, MatmulShape{3, 100, 4096});
  // Q4_Kx8 and Q6_Kx8 hold whole groups of eight rows: one to eight groups with M tails (decode
  // group by group, 1-2 rows of x row by row over chunks of groups, 3 and more through the stored
  // type's panels), K from one super-block to the 8192 of Llama-3.2-1B's down projection, past one
  // K segment (2048 values): 2304 and 4352 end in a short segment. 264 rows of K = 2048 are enough
  // for the CPU backend to pair the halves for the AVX-512 decode kernels (x86.h:
  // kMinPairDistanceBytes), an odd group left alone; 200 rows are several chunks of the prefill
  // and of the two-row path.
  for (DType dtype : {DType::Q4_Kx8, DType::Q6_Kx8}) {
    for (MatmulShape s :
         {MatmulShape{1, 8, 256}, MatmulShape{1, 16, 512}, MatmulShape{5, 24, 768},
          MatmulShape{4, 32, 256}, MatmulShape{17, 16, 1536}, MatmulShape{33, 64, 512},
          MatmulShape{1, 64, 2048}, MatmulShape{3, 24, 2304}, MatmulShape{1, 16, 4352},
          MatmulShape{5, 24, 4352}, MatmulShape{1, 16, 8192}, MatmulShape{2, 24, 2304},
          MatmulShape{1, 40, 4352}, MatmulShape{1, 264, 2048}, MatmulShape{2, 200, 2048},
          MatmulShape{5, 200, 2048}, MatmulShape{65, 64, 512}}) {
      add_matmul_case(cases, dtype, s);
    }
    add_matmul_case(cases, dtype, {1, 16, 256}, Spoil::kNaN, "nan");
    add_matmul_case(cases, dtype, {1, 16, 512}, Spoil::kTinyBlock, "tiny");
    add_matmul_case(cases, dtype, {2, 16, 512}, Spoil::kNegativeInf, "inf");
    add_matmul_case(cases, dtype, {5, 24, 768}, Spoil::kNaN, "spoiled");
    add_matmul_case(cases, dtype, {17, 16, 256}, Spoil::kPositiveInf, "spoiled");
  }
  // Non-finite and tiny x, on every weight type and layout: one row (decode) and row blocks with
  // tails (prefill), the spoiled values in paired and unpaired blocks alike.
  std::vector<DType> layouts = kWeightTypes;
  layouts.insert(layouts.end(), {DType::Q4_0x8, DType::Q8_0x8, DType::F16x4});
  for (DType dtype : layouts) {
    add_matmul_case(cases, dtype, {1, 16, 96}, Spoil::kNaN, "nan");
    add_matmul_case(cases, dtype, {1, 16, 96}, Spoil::kTinyBlock, "tiny");
    add_matmul_case(cases, dtype, {5, 24, 160}, Spoil::kNaN, "spoiled");
    add_matmul_case(cases, dtype, {17, 16, 96}, Spoil::kPositiveInf, "spoiled");
  }
}

}  // namespace edgelm::parity
