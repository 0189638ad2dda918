// embedding(table [V, D], ids int32|int64){padding_idx}: out[i] = table[ids[i]].
// Rows are copied as bytes, so any table dtype works. The padding_idx row is
// zero; an id outside [0, V) gets a zero row too (never a read outside the
// table) and is reported (backend::IndexFault), which fails the step.
#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

template <typename I>
void Lookup(const KernelArgs& args, const std::byte* table, const I* ids, std::byte* out,
            int64_t count, int64_t vocab, int64_t row_bytes, int64_t padding_idx) {
  ParallelRange(
      count, row_bytes / 4 + 1,
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          int64_t id = static_cast<int64_t>(ids[i]);
          std::byte* dst = out + i * row_bytes;
          if (id < 0 || id >= vocab) {  // padding_idx -1 is "none", not an id
            RecordIndexFault(args, id, vocab, 1);
            std::memset(dst, 0, row_bytes);
          } else if (id == padding_idx) {
            std::memset(dst, 0, row_bytes);
          } else {
            std::memcpy(dst, table + id * row_bytes, row_bytes);
          }
        }
      },
      1);
}

std::unique_ptr<Kernel> MakeEmbedding(const ir::Op& op) {
  const Shape& ts = op.inputs[0]->shape();
  int64_t vocab = ts[0];
  int64_t row_bytes = ts[1] * static_cast<int64_t>(DTypeSize(InDType(op)));
  int64_t count = NumElements(op.inputs[1]->shape());
  const int64_t padding_idx = PaddingRow(op, vocab);
  bool i64 = InDType(op, 1) == DType::kI64;
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const auto* table = static_cast<const std::byte*>(args.inputs[0]);
    auto* out = static_cast<std::byte*>(args.outputs[0]);
    if (i64) {
      Lookup(args, table, static_cast<const int64_t*>(args.inputs[1]), out, count, vocab, row_bytes,
             padding_idx);
    } else {
      Lookup(args, table, static_cast<const int32_t*>(args.inputs[1]), out, count, vocab, row_bytes,
             padding_idx);
    }
  });
}

// Rows move as bytes: any table dtype; ids are int32|int64.
TILLER_CPU_KERNEL(
    "embedding", MakeEmbedding,
    Signature("T, I -> T").Where("T", AllDTypes()).Where("I", {DType::kI32, DType::kI64}));

}  // namespace
}  // namespace tiller::cpu
