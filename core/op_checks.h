// The preconditions of every op, as core/backend.h states them, checked once for all backends.
// Each function throws edgelm::Error "[<backend>] <op>: ..." naming the offending tensor; the
// backend passes its name. Dtype support is the backend's own question (supports()), asked before
// these. Index tensors (ids, slots, keep lists) are checked value by value through their host
// mapping when they have one: they are written by the host, so this needs no synchronization.
#pragma once

#include <cstdint>

#include "core/backend.h"
#include "core/tensor.h"

namespace edgelm::op_checks {

void dtype(const char* backend, const Tensor& t, DType expected, const char* op, const char* role);

void embed(const char* backend, const Tensor& table, const Tensor& ids, const Tensor& out);

struct MatmulShape {
  int64_t M, N, K;
};
MatmulShape matmul(const char* backend, const Tensor& x, const Tensor& w, const Tensor& y);

void rms_norm(const char* backend, const Tensor& x, const Tensor& weight, float eps,
              const Tensor& y);

void rope(const char* backend, const Tensor& x, const Tensor& positions, const Tensor& inv_freq,
          const Tensor& out);

void attention(const char* backend, const AttentionArgs& args);

// silu_mul and add: three F32 tensors of one shape.
void elementwise(const char* backend, const char* op, const Tensor& a, const Tensor& b,
                 const Tensor& out);

void softmax(const char* backend, const Tensor& x, const Tensor& y);

void cast(const char* backend, const Tensor& src, const Tensor& dst);

void kv_append(const char* backend, const Tensor& src, const Tensor& slots, const Tensor& cache);

void kv_compact(const char* backend, const Tensor& cache, const Tensor& keep);

void copy(const char* backend, const Tensor& src, const Tensor& dst);

}  // namespace edgelm::op_checks
