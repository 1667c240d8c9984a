#include "core/backend.h"

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

const char* op_name(OpKind op) {
  const auto index = static_cast<size_t>(op);
  EDGELM_CHECK(index < kOpNames.size(), "[backend] invalid op value ", index);
  return kOpNames[index];
}

std::span<const OpKind> all_ops() {
  return kAllOps;
}

}  // namespace edgelm
