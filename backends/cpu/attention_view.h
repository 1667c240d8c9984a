// AttentionArgs as plain pointers and sizes, for the SIMD kernel files (simd/attention.h). Those
// files are compiled with their own ISA flags and call no inline Tensor method (see x86/x86.h);
// attention_view() is defined out of line in kernel_table.cpp, compiled without ISA flags.
#pragma once

#include <cstdint>

#include "core/backend.h"

namespace edgelm::cpu {

struct AttentionView {
  const float* q;         // [n_queries, n_heads, head_dim]
  const void* k;          // F32|F16 [n_slots, n_kv_heads, head_dim]
  const void* v;          // same as k
  const int32_t* q_pos;   // [n_queries]
  const int32_t* kv_pos;  // [n_slots, n_kv_heads]
  float* out;             // [n_queries, n_heads, head_dim]
  float* mass;            // [n_kv_heads, n_slots], or null when not exported
  int64_t n_queries, n_heads, head_dim, n_slots, n_kv_heads;
  int64_t mass_first_query;
  float scale;
};

AttentionView attention_view(const AttentionArgs& args);

}  // namespace edgelm::cpu
