// embedding(table [V, D], ids int32|int64){padding_idx}: out[i] = table[ids[i]].
// Rows are copied as bytes, so any table dtype works. The padding_idx row is
// zero; an id outside [0, V) gets a zero row too (never a read outside the
// table) and is reported (backend::IndexFault), which fails the step. A
// part of a table (table_rows, row_begin: ir/ops/nn.cc) takes ids of the
// whole table and gives a zero row for those of other parts.
#include "backends/cpu/kernels/kernel_utils.h"
#include "ir/ops/op_helpers.h"

namespace tiller::cpu {
namespace {

constexpr int64_t kAhead = 8;  // lookups between a row's prefetch and its copy

// kRowBytes: the rows' bytes where they are known at compile time (the
// copies then inline: a call per 64-byte row cost as much as the copy), 0
// where `row_bytes` says.
template <int64_t kRowBytes, typename I>
void Lookup(const KernelArgs& args, const std::byte* table, const I* ids, std::byte* out,
            int64_t count, const ir::TablePart& part, int64_t dynamic_row_bytes) {
  const int64_t row_bytes = kRowBytes ? kRowBytes : dynamic_row_bytes;
  ParallelRange(
      count, row_bytes / 4 + 1,
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          // The row kAhead lookups on is fetched meanwhile: a large table's
          // rows are cache misses, one after another otherwise.
          if (i + kAhead < e) {
            const auto ahead =
                static_cast<uint64_t>(static_cast<int64_t>(ids[i + kAhead]) - part.begin);
            if (ahead < static_cast<uint64_t>(part.rows))
              for (int64_t j = 0; j < row_bytes; j += 64)
                __builtin_prefetch(table + static_cast<int64_t>(ahead) * row_bytes + j);
          }
          const int64_t id = static_cast<int64_t>(ids[i]);
          // Unsigned: one compare tells whether the id is in the part.
          const auto local = static_cast<uint64_t>(id - part.begin);
          std::byte* dst = out + i * row_bytes;
          if (local < static_cast<uint64_t>(part.rows) && id != part.padding_row) {
            std::memcpy(dst, table + static_cast<int64_t>(local) * row_bytes, row_bytes);
            continue;
          }
          if (id < 0 || id >= part.vocab)  // padding_idx -1 is "none", not an id
            RecordIndexFault(args, id, part.vocab, 1);
          std::memset(dst, 0, row_bytes);
        }
      },
      1);
}

std::unique_ptr<Kernel> MakeEmbedding(const ir::Op& op) {
  const Shape& ts = op.inputs[0]->shape();
  const ir::TablePart part = ir::ReadTablePart(op, ts[0]);
  int64_t row_bytes = ts[1] * static_cast<int64_t>(DTypeSize(InDType(op)));
  int64_t count = NumElements(op.inputs[1]->shape());
  bool i64 = InDType(op, 1) == DType::kI64;
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const auto* table = static_cast<const std::byte*>(args.inputs[0]);
    auto* out = static_cast<std::byte*>(args.outputs[0]);
    auto run = [&](auto id_tag) {
      const auto* ids = static_cast<const decltype(id_tag)*>(args.inputs[1]);
      // Widths 16, 32 and 64 of float32 (the usual embedding widths).
      switch (row_bytes) {
        case 64:
          return Lookup<64>(args, table, ids, out, count, part, row_bytes);
        case 128:
          return Lookup<128>(args, table, ids, out, count, part, row_bytes);
        case 256:
          return Lookup<256>(args, table, ids, out, count, part, row_bytes);
        default:
          return Lookup<0>(args, table, ids, out, count, part, row_bytes);
      }
    };
    if (i64)
      run(int64_t{});
    else
      run(int32_t{});
  });
}

// Rows move as bytes: any table dtype; ids are int32|int64.
TILLER_CPU_KERNEL(
    "embedding", MakeEmbedding,
    Signature("T, I -> T").Where("T", AllDTypes()).Where("I", {DType::kI32, DType::kI64}));

}  // namespace
}  // namespace tiller::cpu
