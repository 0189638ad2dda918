// Data movement between devices, replicas and pipeline iterations: ordinary
// IR ops, so placement, replication and pipelining are graph rewrites that
// insert them (compile/placement.h inserts copies).
//   copy(x) {to_device}: x's value on compile device `to_device` (the op runs
//     there; its input lives on another device).
//   send(x) {peer, tag}: hands x to rank/device `peer`; no outputs, never
//     removed as dead code. recv() {peer, tag, dtype, shape}: the matching
//     receive.
//   all_reduce(x...) {reduction: "sum"|"mean", group: replica ids (empty: all),
//     scale}: scale x the reduction of each input (a mean over micro-batches
//     as well as replicas folds into it, saving a pass over the gradients).
//     Several inputs of one dtype are reduced as one message (a bucket: the
//     bucket_all_reduce pass), output i for input i.
//   all_reduce_start(x...) {reduction, group, scale}: the inputs packed into
//     one flat message, whose reduction starts on the device's collective
//     stream and goes on while later ops run (the overlap_all_reduce pass
//     puts it in the backward pass, where its gradients are ready); out is
//     that message, complete only once all_reduce_wait has read it.
//   all_reduce_wait(message) {dims, ranks}: waits for the reduction, then
//     unpacks it into outputs of the given shapes (ranks[i] dims each, from
//     dims in turn).
//   reduce_scatter(x) {reduction, group, axis, parts, rank, scale}: scale x
//     x reduced over the group, then part `rank` of dim `axis` split into
//     `parts` contiguous parts of balanced sizes (core/shape.h PartOf). Each
//     replica's graph has its own rank, so the part's size is static.
//   all_gather(x) {group, axis, parts, rank, size}: every rank's part
//     concatenated along `axis` into `size` rows; x is part `rank` of them.
//   gather_rows(part_0, ids_0, part_1, ids_1, ...) {vocabs, padding_rows,
//     parts, rank, group}: out_t [n_t, D_t] = rows ids_t (flattened) of
//     table t, which has vocabs[t] rows split by rows over the replicas
//     (part_t: this rank's rows PartOf(vocabs[t], parts, rank)), whichever
//     replica holds them; padding_rows[t] (a whole-table row, -1: none) and
//     an id outside the table read as zeros (the kernel reports the latter).
//     Several tables' lookups are one meeting of the replicas.
//   exchange_rows(ids_0, rows_0, ids_1, rows_1, ...) {vocabs, scales, parts,
//     rank, group}: for table t (vocabs[t] rows split by rows over the replicas),
//     every replica's row gradient (ids_t [n] int32|int64, rows_t [n, D])
//     reduced to the pairs whose id lies in this rank's rows, in rank order:
//     out ids [parts x n] (the rest an id of another part), out rows
//     [parts x n, D] (the rest zeros), rows times scales[t] (float32). What
//     a row update of this rank's part keeps of the gathered (scaled) ids
//     and rows, in the same order.
//   stash(x) {depth}: pushes x into a ring of `depth` slots (the activations
//     a pipeline stage keeps for its backward pass); out [depth, ...x].
//   restore(ring) {}: the oldest slot of a stash ring.
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

void InferSame(InferContext& ctx) {
  ctx.AddOutput(ctx.input(0));
}

// Output i has input i's type; one dtype for all (they travel as one
// message).
void InferEachOfOneDType(InferContext& ctx) {
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).dtype != ctx.input(0).dtype)
      ctx.Fail("input {} is {}, input 0 {}: a bucket holds one dtype", i,
               DTypeName(ctx.input(i).dtype), DTypeName(ctx.input(0).dtype));
    ctx.AddOutput(ctx.input(i));
  }
}

int Axis(InferContext& ctx, int rank) {
  int64_t axis = ctx.op().GetInt("axis");
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) ctx.Fail("axis {} out of range for rank {}", axis, rank);
  return static_cast<int>(axis);
}

// The part attributes: parts >= 1 and 0 <= rank < parts.
std::pair<int, int> Parts(InferContext& ctx) {
  const int64_t parts = ctx.op().GetInt("parts"), rank = ctx.op().GetInt("rank");
  if (parts < 1 || rank < 0 || rank >= parts) ctx.Fail("rank {} of {} parts", rank, parts);
  return {static_cast<int>(parts), static_cast<int>(rank)};
}

void InferReduceScatter(InferContext& ctx) {
  TensorType t = ctx.input(0);
  const int a = Axis(ctx, static_cast<int>(t.shape.size()));
  const auto [parts, rank] = Parts(ctx);
  t.shape[a] = PartOf(t.shape[a], parts, rank).size();
  ctx.AddOutput(t);
}

void InferAllGather(InferContext& ctx) {
  TensorType t = ctx.input(0);
  const int a = Axis(ctx, static_cast<int>(t.shape.size()));
  const auto [parts, rank] = Parts(ctx);
  const int64_t size = ctx.op().GetInt("size");
  if (size < 0 || PartOf(size, parts, rank).size() != t.shape[a])
    ctx.Fail("part {} of {} rows in {} parts is not {} rows", rank, size, parts, t.shape[a]);
  t.shape[a] = size;
  ctx.AddOutput(t);
}

void InferGatherRows(InferContext& ctx) {
  const std::vector<int64_t>& vocabs = ctx.op().GetInts("vocabs");
  const std::vector<int64_t>& padding = ctx.op().GetInts("padding_rows");
  const auto [parts, rank] = Parts(ctx);
  if (ctx.num_inputs() % 2 || vocabs.size() * 2 != ctx.num_inputs() ||
      padding.size() != vocabs.size())
    ctx.Fail(
        "{} inputs, {} vocabs, {} padding rows: (part, ids) pairs, one vocab and padding "
        "row each",
        ctx.num_inputs(), vocabs.size(), padding.size());
  for (size_t t = 0; t < vocabs.size(); ++t) {
    const TensorType& part = ctx.input(2 * t);
    const TensorType& ids = ctx.input(2 * t + 1);
    if (part.shape.size() != 2 || part.shape[0] != PartOf(vocabs[t], parts, rank).size())
      ctx.Fail("table {}: {} is not part {} of {} rows in {} parts", t, part.ToString(), rank,
               vocabs[t], parts);
    if (ids.dtype != DType::kI32 && ids.dtype != DType::kI64)
      ctx.Fail("table {}: ids are {} (int32 or int64)", t, DTypeName(ids.dtype));
    if (padding[t] < -1 || padding[t] >= vocabs[t])
      ctx.Fail("table {}: padding row {} of {}", t, padding[t], vocabs[t]);
    ctx.AddOutput({part.dtype, {NumElements(ids.shape), part.shape[1]}});
  }
}

void InferExchangeRows(InferContext& ctx) {
  const std::vector<int64_t>& vocabs = ctx.op().GetInts("vocabs");
  const auto [parts, rank] = Parts(ctx);
  if (vocabs.size() * 2 != ctx.num_inputs() || ctx.op().GetFloats("scales").size() != vocabs.size())
    ctx.Fail("{} inputs, {} vocabs, {} scales: (ids, rows) pairs, one vocab and scale each",
             ctx.num_inputs(), vocabs.size(), ctx.op().GetFloats("scales").size());
  for (size_t t = 0; t < vocabs.size(); ++t) {
    const TensorType& ids = ctx.input(2 * t);
    const TensorType& rows = ctx.input(2 * t + 1);
    if (ids.dtype != DType::kI32 && ids.dtype != DType::kI64)
      ctx.Fail("table {}: ids are {} (int32 or int64)", t, DTypeName(ids.dtype));
    if (ids.shape.size() != 1 || rows.shape.size() != 2 || rows.shape[0] != ids.shape[0] ||
        rows.dtype != DType::kF32)
      ctx.Fail("table {}: ids {} and rows {}: [n] ids and float32 [n, D] rows", t, ids.ToString(),
               rows.ToString());
    if (vocabs[t] < parts) ctx.Fail("table {}: {} rows in {} parts", t, vocabs[t], parts);
    ctx.AddOutput({ids.dtype, {ids.shape[0] * parts}});
    ctx.AddOutput({rows.dtype, {rows.shape[0] * parts, rows.shape[1]}});
  }
  (void)rank;
}

void InferAllReduceStart(InferContext& ctx) {
  int64_t total = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).dtype != ctx.input(0).dtype)
      ctx.Fail("input {} is {}, input 0 {}: a message holds one dtype", i,
               DTypeName(ctx.input(i).dtype), DTypeName(ctx.input(0).dtype));
    total += NumElements(ctx.input(i).shape);
  }
  ctx.AddOutput({ctx.input(0).dtype, {total}});
}

void InferAllReduceWait(InferContext& ctx) {
  const std::vector<int64_t>& dims = ctx.op().GetInts("dims");
  const std::vector<int64_t>& ranks = ctx.op().GetInts("ranks");
  size_t at = 0;
  int64_t total = 0;
  for (int64_t r : ranks) {
    if (r < 0 || at + static_cast<size_t>(r) > dims.size())
      ctx.Fail("ranks {} do not split dims {}", ShapeToString(ranks), ShapeToString(dims));
    Shape shape(dims.begin() + static_cast<std::ptrdiff_t>(at),
                dims.begin() + static_cast<std::ptrdiff_t>(at + r));
    at += static_cast<size_t>(r);
    total += NumElements(shape);
    ctx.AddOutput({ctx.input(0).dtype, shape});
  }
  if (at != dims.size() || ctx.input(0).shape != Shape{total})
    ctx.Fail("dims {} in ranks {} do not unpack a message of {}", ShapeToString(dims),
             ShapeToString(ranks), ShapeToString(ctx.input(0).shape));
}

void InferRecv(InferContext& ctx) {
  DType dtype;
  if (!ParseDType(ctx.op().GetStr("dtype"), &dtype)) ctx.Fail("bad dtype");
  ctx.AddOutput({dtype, ctx.op().GetInts("shape")});
}

void InferStash(InferContext& ctx) {
  TensorType t = ctx.input(0);
  int64_t depth = ctx.op().GetInt("depth");
  if (depth < 1) ctx.Fail("depth {} < 1", depth);
  t.shape.insert(t.shape.begin(), depth);
  ctx.AddOutput(t);
}

void InferRestore(InferContext& ctx) {
  TensorType t = ctx.input(0);
  if (t.shape.empty()) ctx.Fail("a stash ring has rank >= 1");
  t.shape.erase(t.shape.begin());
  ctx.AddOutput(t);
}

constexpr auto kFollows = PrecisionRule::kFollowsInput;

const bool kRegistered = [] {
  RegisterOpSchema(OpSchema{"copy", 1, 1, InferSame}
                       .RequiredAttr("to_device", AttrKind::kInt)
                       .Precision(kFollows)
                       .Layout(LayoutRule::kAgnostic));
  RegisterOpSchema(OpSchema{"send", 1, 1, [](InferContext&) {}}
                       .RequiredAttr("peer", AttrKind::kInt)
                       .Attr("tag", int64_t{0})
                       .SideEffects()
                       .Precision(kFollows)
                       .Layout(LayoutRule::kAgnostic));
  RegisterOpSchema(OpSchema{"recv", 0, 0, InferRecv}
                       .RequiredAttr("peer", AttrKind::kInt)
                       .Attr("tag", int64_t{0})
                       .RequiredAttr("dtype", AttrKind::kString)
                       .RequiredAttr("shape", AttrKind::kInts)
                       .Precision(kFollows)
                       .Layout(LayoutRule::kAgnostic));
  RegisterOpSchema(OpSchema{"all_reduce", 1, 1 << 20, InferEachOfOneDType}
                       .Attr("reduction", "sum")
                       .Attr("group", std::vector<int64_t>{})
                       .Attr("scale", 1.0)
                       .Precision(kFollows)
                       .Layout(LayoutRule::kAgnostic));
  RegisterOpSchema(OpSchema{"all_reduce_start", 1, 1 << 20, InferAllReduceStart}
                       .Attr("reduction", "sum")
                       .Attr("group", std::vector<int64_t>{})
                       .Attr("scale", 1.0)
                       .Precision(kFollows)
                       .Layout(LayoutRule::kFixed));
  RegisterOpSchema(OpSchema{"all_reduce_wait", 1, 1, InferAllReduceWait}
                       .RequiredAttr("dims", AttrKind::kInts)
                       .RequiredAttr("ranks", AttrKind::kInts)
                       .Precision(kFollows)
                       .Layout(LayoutRule::kFixed));
  RegisterOpSchema(OpSchema{"reduce_scatter", 1, 1, InferReduceScatter}
                       .Attr("reduction", "sum")
                       .Attr("group", std::vector<int64_t>{})
                       .Attr("axis", int64_t{0})
                       .RequiredAttr("parts", AttrKind::kInt)
                       .RequiredAttr("rank", AttrKind::kInt)
                       .Attr("scale", 1.0)
                       .Precision(kFollows)
                       .Layout(LayoutRule::kAxisAttrs, {"axis"}));
  RegisterOpSchema(OpSchema{"all_gather", 1, 1, InferAllGather}
                       .Attr("group", std::vector<int64_t>{})
                       .Attr("axis", int64_t{0})
                       .RequiredAttr("parts", AttrKind::kInt)
                       .RequiredAttr("rank", AttrKind::kInt)
                       .RequiredAttr("size", AttrKind::kInt)
                       .Precision(kFollows)
                       .Layout(LayoutRule::kAxisAttrs, {"axis"}));
  RegisterOpSchema(OpSchema{"gather_rows", 2, 1 << 20, InferGatherRows}
                       .RequiredAttr("vocabs", AttrKind::kInts)
                       .RequiredAttr("padding_rows", AttrKind::kInts)
                       .Attr("group", std::vector<int64_t>{})
                       .RequiredAttr("parts", AttrKind::kInt)
                       .RequiredAttr("rank", AttrKind::kInt)
                       .Precision(kFollows)
                       .Layout(LayoutRule::kFixed));
  RegisterOpSchema(OpSchema{"exchange_rows", 2, 1 << 20, InferExchangeRows}
                       .RequiredAttr("vocabs", AttrKind::kInts)
                       .RequiredAttr("scales", AttrKind::kFloats)
                       .Attr("group", std::vector<int64_t>{})
                       .RequiredAttr("parts", AttrKind::kInt)
                       .RequiredAttr("rank", AttrKind::kInt)
                       .Precision(kFollows)
                       .Layout(LayoutRule::kFixed));
  RegisterOpSchema(OpSchema{"stash", 1, 1, InferStash}
                       .RequiredAttr("depth", AttrKind::kInt)
                       .Precision(kFollows)
                       .Layout(LayoutRule::kFixed));
  RegisterOpSchema(OpSchema{"restore", 1, 1, InferRestore}.NoAttrs().Precision(kFollows).Layout(
      LayoutRule::kFixed));
  return true;
}();

}  // namespace
}  // namespace tiller::ir
