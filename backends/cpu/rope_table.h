// The cosines and sines of one token's rotary embedding, shared by the SIMD rope kernels and kept
// per thread from one call to the next.
#pragma once

#include <cstdint>

namespace edgelm::cpu {

// [cos θ_0 .. cos θ_{half-1}, sin θ_0 .. sin θ_{half-1}] with θ_i = float(position) · inv_freq[i]
// (the angle formed in float32 as Hugging Face does), evaluated in double and rounded to float.
// The memory belongs to the calling thread and holds until its next call. The table is computed
// again only when position, half or inv_freq's values differ from that thread's previous call: a
// decode step ropes Q and K of every layer at one position, so Llama 3.2 1B's 32 calls per token
// share one table instead of evaluating 32 cosines and sines each (about 1 us a call).
// Compiled without instruction-set flags, so every kernel table may call it (x86/x86.h).
const float* rope_rotation(int32_t position, const float* inv_freq, int64_t half);

}  // namespace edgelm::cpu
