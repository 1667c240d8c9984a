// How the matmul families walk an output: bands of rows of x over chunks of weight rows. Shared by
// simd/float_matmul.h and simd/quant_matmul.h.
//
// Textual header: include it inside the instruction set's own anonymous namespace (see
// simd/vec_avx2.h).

int64_t min_of(int64_t a, int64_t b) {
  return a < b ? a : b;
}

// Runs band.template operator()<MR>(m0) over the rows of x: bands of kRows rows (4, or 3 for
// tiles that hold four weight rows), then one band of the rows left, so each tile is instantiated
// for MR = 4, 3, 2 and 1 only. With bands of three, one row left over (M = 64: 21 x 3 + 1) would
// run as a GEMV, which reads the weights at a third of the tile's rate; the last four rows are
// taken as two bands of two instead.
template <int kRows = 4, class Band>
void for_each_band(int64_t M, Band&& band) {
  static_assert(kRows == 3 || kRows == 4);
  const int64_t full = kRows == 3 && M % 3 == 1 && M >= 4 ? M - 4 : M;
  int64_t m = 0;
  for (; m + kRows <= full; m += kRows) band.template operator()<kRows>(m);
  if (full != M) {
    band.template operator()<2>(m);
    band.template operator()<2>(m + 2);
    return;
  }
  switch (M - m) {
    case 3:
      band.template operator()<3>(m);
      break;
    case 2:
      band.template operator()<2>(m);
      break;
    case 1:
      band.template operator()<1>(m);
      break;
    default:
      break;
  }
}

// Weight rows per chunk: about kChunkBytes of weights (an ISA trait: what stays in the L2 of the
// cores it serves while every band of x passes over them), at least four.
template <size_t kChunkBytes>
int64_t weight_chunk_rows(size_t row_bytes) {
  const int64_t rows = static_cast<int64_t>(kChunkBytes / (row_bytes ? row_bytes : 1));
  return rows < 4 ? 4 : rows;
}
