// Per-thread scratch memory of the SIMD kernel files (x86/, arm/), one growing buffer per slot: a
// kernel asks for the bytes it needs on every call and gets the same 64-byte aligned buffer back
// once it is large enough, so steady-state decoding allocates nothing. The contents are not
// preserved across a call that grows a buffer. Defined in kernel_table.cpp, which is compiled
// without ISA flags, so every kernel file may call it (see x86/x86.h).
#pragma once

#include <cstddef>

namespace edgelm::cpu {

// kWeightPanels, kUnitSums: the sub-block matmuls' unpacked weight panels and sums of x
// (simd/block_matmul.h).
enum class Scratch { kActivations, kScores, kAccumulators, kWeightPanels, kUnitSums, kCount };
void* scratch(Scratch slot, size_t bytes);

}  // namespace edgelm::cpu
