#include "core/backend.h"

#include <algorithm>
#include "core/error.h"

namespace edgelm {
namespace {

constexpr std::array<const char*, kOpCount> kOpNames = {
    "embed", "matmul",  "rms_norm", "rope",      "attention",  "silu_mul",
    "add",   "softmax", "cast",     "kv_append", "kv_compact", "copy",
};

constexpr std::array<OpKind, kOpCount> kAllOps = {
    OpKind::Embed,     OpKind::Matmul,   OpKind::RmsNorm,   OpKind::Rope,
    OpKind::Attention, OpKind::SiluMul,  OpKind::Add,       OpKind::Softmax,
    OpKind::Cast,      OpKind::KvAppend, OpKind::KvCompact, OpKind::Copy,
};

}  // namespace

void Backend::matmul_shared_x(const Tensor& x, std::initializer_list<Tensor> ws,
                              std::initializer_list<Tensor> ys) {
  EDGELM_CHECK(ws.size() == ys.size(), "[", name(), "] matmul_shared_x: ", ws.size(),
               " weights for ", ys.size(), " outputs");
  const Tensor* y = ys.begin();
  for (const Tensor& w : ws) matmul(x, w, *y++);
}

const char* op_name(OpKind op) {
  const auto index = static_cast<size_t>(op);
  EDGELM_CHECK(index < kOpNames.size(), "[backend] invalid op value ", index);
  return kOpNames[index];
}

std::span<const OpKind> all_ops() {
  return kAllOps;
}

std::vector<OpTiming> sorted_by_time(const OpTimingTable& table) {
  std::vector<OpTiming> rows;
  rows.reserve(table.size());
  for (const auto& [key, timing] : table) rows.push_back(timing);
  std::sort(rows.begin(), rows.end(),
            [](const OpTiming& a, const OpTiming& b) { return a.seconds > b.seconds; });
  return rows;
}

}  // namespace edgelm
