// Graph passes: small named rewrites, run in order from one declared list
// for inference and training alike, each followed by the verifier. A pass
// states its rewrite in its file's first lines (a three-line diagram) and
// returns how many rewrites it made; RunPasses records what each changed.
//
// How to add a pass: docs/ARCHITECTURE.md, "Adding a pass".
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tiller::passes {

struct PassContext {
  bool training = false;  // the graph holds a backward and an update part
  // The devices multiply int8 exactly (a backend registers linear_int8 /
  // conv2d_int8 only where its int32 sums are exact; elsewhere quantized
  // pairs run as float32 math).
  bool int8_gemms = true;
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual const char* name() const = 0;
  // One line: what it rewrites into what.
  virtual const char* summary() const = 0;
  // Returns the number of rewrites.
  virtual int Run(ir::Graph& g, const PassContext& ctx) = 0;
  // What the last Run would add to its record (PassRecord::detail): the
  // split's stages, what mixed precision converted; "" for most passes.
  virtual std::string detail() const { return ""; }
};

// A pass from a function, for rewrites that need no context.
class FunctionPass : public Pass {
 public:
  FunctionPass(const char* name, const char* summary, int (*fn)(ir::Graph&))
      : name_(name), summary_(summary), fn_(fn) {}
  const char* name() const override { return name_; }
  const char* summary() const override { return summary_; }
  int Run(ir::Graph& g, const PassContext&) override { return fn_(g); }

 private:
  const char* name_;
  const char* summary_;
  int (*fn_)(ir::Graph&);
};

// A function pass that leaves training graphs alone (its rewrite has no
// gradient rules behind it).
class InferencePass : public FunctionPass {
 public:
  using FunctionPass::FunctionPass;
  int Run(ir::Graph& g, const PassContext& ctx) override {
    return ctx.training ? 0 : FunctionPass::Run(g, ctx);
  }
};

// An inference pass that writes int8 GEMMs: skipped without them.
class Int8Pass : public InferencePass {
 public:
  using InferencePass::InferencePass;
  int Run(ir::Graph& g, const PassContext& ctx) override {
    return ctx.int8_gemms ? InferencePass::Run(g, ctx) : 0;
  }
};

// What one pass did: its rewrites and the op types it added and removed.
struct PassRecord {
  std::string name;
  std::string summary;
  int rewrites = 0;
  size_t ops_before = 0, ops_after = 0;
  std::map<std::string, int> added, removed;  // op type -> count
  std::string detail;                         // stage-specific (placement: ops per device)
};

// Runs `pass`, verifies the graph and records the change.
PassRecord RunPass(Pass& pass, ir::Graph& g, const PassContext& ctx);

// matmul(dequantize(quantize(x)), dequantize(W int8 const)) [+ add(., b const)]
// -> linear_int8(quantize(x){int8}, W, scale, b) (passes/int8_gemm.cc)
int QuantizeMatmuls(ir::Graph& g);
// conv2d(dequantize(quantize(x)), dequantize(W int8 const))
// -> conv2d_int8(quantize(x){int8}, W, scale) (passes/int8_gemm.cc)
int QuantizeConvs(ir::Graph& g);
// linear_int8|conv2d_int8 -> quantize(.){int8} -> the op{out_scale}, writing
// int8 (passes/int8_gemm.cc)
int FuseRequantize(ir::Graph& g);
// matmul(x, W const) [+ add(., b)], matmul(x, W) + add(., b) -> linear(x, W, b)
int FuseLinear(ir::Graph& g);
// scale(x){power of two} -> matmuls (its only readers), and matmul ->
// scale(.){power of two} -> matmul{alpha}
int FoldScaleIntoMatmul(ir::Graph& g);
// transpose(.){perm keeping the last dim} -> matmuls (its only readers), and
// matmul -> such a transpose -> matmul{perm_a | perm_b | perm_out}: strides,
// not a moved tensor
int FoldTransposeIntoMatmul(ir::Graph& g);
// matmul(q, k){heads} [-> add(., mask)] -> softmax -> matmul(., v){heads}
// -> attention(q, k, v, mask) (inference, float32; passes/fuse_attention.cc)
int FuseAttention(ir::Graph& g);
// three linears of one input with constant weights -> attention ->
// one linear of the weights side by side, read in place by the attention
// (passes/merge_qkv.cc)
int MergeQkv(ir::Graph& g);
// linear(x, W, b) -> add(., r) -> linear(x, W, b, r): the residual added as
// the GEMM writes (inference; passes/fuse_linear_residual.cc)
int FuseLinearResidual(ir::Graph& g);
// conv2d|conv2d_transpose(x, W) -> add(., c const per output channel) -> the op with bias c
int FuseConvBias(ir::Graph& g);
// conv2d -> batch_norm (inference, constant statistics) -> conv2d with folded weights
int FoldBatchNorm(ir::Graph& g);
// conv2d|pool2d chains and the elementwise ops between them (NCHW) ->
// channel-last, transposes only at the chain's edges (inference;
// passes/channels_last.cc)
int ChannelsLast(ir::Graph& g);
// conv2d{NHWC}(x, W, b) -> add(., r) [-> relu] -> conv2d(x, W, b, r){activation}
int FuseConvAdd(ir::Graph& g);
// conv2d|linear -> relu|tanh|gelu|hard_swish|hard_sigmoid|relu6 -> conv2d|linear{activation}
int FuseActivation(ir::Graph& g);
// linear(x, W const mostly zero blocks) -> linear_block_sparse (inference):
// block_sparse_linear.cc.
int BlockSparseLinear(ir::Graph& g);
// matmul|linear(x, W) and x's gradient matmul(g, W^T), W a trained weight
// the program keeps pruned (named, or "masked": every weight multiplied by
// a constant mask after its update) -> linear_block_sparse (training):
// block_sparse_weights.cc.
int BlockSparseWeights(ir::Graph& g, const std::vector<std::string>& names, std::string* detail);
// add(x, embedding_grad(ids, dy)) -> embedding_grad_add(x, ids, dy): a
// table's gradient sum without a table-sized temporary (training)
int FuseEmbeddingGradAdd(ir::Graph& g);

// update ops -> the shard and stage of the weight they update (training)
int PlaceUpdateOps(ir::Graph& g);

// Consecutive single-gradient all_reduce ops of one placement, reduction,
// scale and dtype -> one all_reduce of many inputs per bucket of at most
// max_bytes (passes/bucket_all_reduce.cc). Returns the ops merged.
int BucketAllReduce(ir::Graph& g, size_t max_bytes);

// all_reduce (update phase) of gradients all computed in the backward pass
// -> all_reduce_start right after the last of them (backward phase: the
// reduction runs on the device's collective stream while the backward pass
// goes on) + all_reduce_wait where the all_reduce was. Returns the ops split.
int OverlapAllReduce(ir::Graph& g);
// backward reads of forward activations -> the activations recomputed in
// the backward phase from checkpoints: matmul / conv outputs and stage
// inputs, or (only_stage_inputs) stage inputs alone (training;
// passes/recompute.cc)
int RecomputeActivations(ir::Graph& g, bool only_stage_inputs = false);

// Automatic pipeline stages (passes/auto_split.cc) for a forward graph
// nobody sharded: contiguous runs of forward ops of about equal cost, each
// op's stage set to its run's index and its shard (device) to that index
// modulo `devices` (devices < stages interleaves: device d runs stages d,
// d + devices, ...). `detail` says the split.
struct SplitResult {
  std::vector<double> cost;  // per stage
  std::vector<int> ops;      // per stage
  std::string detail;        // "stage 0: 40 ops, 49.8% of the cost; stage 1: ..."
};
// training: balance forward + backward (TrainingOpCost), else forward;
// micro_batches: per weight update (accumulation), which spreads its cost.
SplitResult AutoSplitStages(ir::Graph& g, int stages, bool training = false, int micro_batches = 1,
                            int devices = 0);  // 0: as many as stages
// The same split of the forward ops by given costs (one per forward op, in
// graph order; any unit): the measured costs of compile/measured_cost.h.
// It minimises the busiest device's cost plus the pipeline's fill and drain,
// (devices - 1) / micro_batches x the largest stage.
SplitResult SplitStagesByCost(ir::Graph& g, int stages, const std::vector<double>& costs,
                              int devices = 0, int micro_batches = 1);
// The cost the split balances: 2 x multiply-adds of matmul / linear / conv,
// 120 x the elements written for other ops (memory-bound), 0 for views.
double ForwardOpCost(const ir::Op& op);
// Forward + backward estimate of a forward op: 3 x ForwardOpCost, plus the
// elements of the weights it reads (their gradients' accumulation; not an
// embedding's table, whose gradient is scattered into its accumulator), plus
// the update of the weights it reads first, over `micro_batches`.
double TrainingOpCost(const ir::Op& op, int micro_batches = 1);
// 2 x multiply-adds of a matmul / linear / conv op (from the shapes); 0 for
// every other op.
double OpFlops(const ir::Op& op);
// Whether any op has a shard or stage other than 0 (Paddle's ipu_index /
// ipu_stage were set).
bool IsSharded(const ir::Graph& g);

// Replicated tensor sharding (passes/shard_optimizer_state.cc): on replica
// `rank` of `replicas`, each elementwise optimizer op updates only its part
// of the weight, from a reduce-scattered gradient, into states of the
// part's size, and all-gathers the weight. `out` gets every state it
// sharded; `detail` the saving and what it kept whole.
struct ShardOptions {
  int replicas = 1;
  int rank = 0;
  int64_t min_elements = 0;  // weights with fewer elements stay whole
  // shard_embedding_rows: a split table's update receives only its part's
  // row gradients (exchange_rows) instead of every replica's. Not where
  // the runtime skips updates on non-finite gradients (loss scaling that
  // steers): every replica must see every gradient to decide alike.
  bool exchange_row_gradients = false;
};
struct ShardedState {
  std::string name;
  ir::TensorType whole;  // the state's type unsharded
  PartRange part;        // this replica's elements of its flattened value
  // Elements per unit of the split: the parts are PartOf(units, replicas,
  // rank) in units of this many elements (1; a table's width where it is
  // split by rows).
  int64_t unit = 1;
};
int ShardOptimizerState(ir::Graph& g, const ShardOptions& options, std::vector<ShardedState>* out,
                        std::string* detail);

// Embedding tables split by rows over the replicas (passes/
// shard_embedding_rows.cc; CollectiveSettings::shard_embedding_rows): on
// replica `rank` of `replicas`, a table [V, D] that only sparse lookups
// read (embedding{sparse}) keeps rows PartOf(V, replicas, rank), and so
// does its row update's per-element state. A lookup gathers every
// replica's ids, looks up the rows of its part (zeros for the others') and
// reduce-scatters the rows back to the replica that asked; the row update
// reads the gathered row gradient (the driver's) and updates its part. The
// same rows as replicated tables, summed with zeros. In training, a table
// with sparse lookups whose update does not take rows fails (kUnimplemented)
// naming it. `out` gets every state split.
int ShardEmbeddingRows(ir::Graph& g, const ShardOptions& options, std::vector<ShardedState>* out,
                       std::string* detail);

// Mixed precision (passes/mixed_precision.cc): matmul, matmul_accumulate,
// linear and conv2d on float32 operands multiply in `half` with float32
// accumulation and result (out_dtype float32); weights known at compile
// time are converted once, other operands cast (one cast per value). Without
// compute_in_half the operands are only rounded to `half` (cast there and
// back) and the ops stay float32. `detail` says what changed.
struct MixedPrecisionOptions {
  DType half = DType::kBF16;  // kBF16 or kF16
  bool compute_in_half = true;
  // Fold casts into the half-safe ops that produce their operands (those
  // then write half directly). Off with stochastic rounding, which replaces
  // each cast.
  bool fold_casts = true;
};
int ConvertToMixedPrecision(ir::Graph& g, const MixedPrecisionOptions& options,
                            std::string* detail);
// Stochastic rounding (passes/stochastic_rounding.cc): every cast of a
// float32 value to bfloat16 / float16 becomes a stochastic_cast drawing from
// (seed, the graph's step input, element). `detail` says how many.
int RoundStochastically(ir::Graph& g, uint64_t seed, std::string* detail);

// Whether ConvertToMixedPrecision multiplies IR op `type` in half precision.
bool MultipliesInHalf(const std::string& type);

// Gradient statistics for loss scaling (passes/gradient_statistics.cc):
// each backward value rounded to `half` (a cast's float32 input, a
// converted op's half output) gets a gradient_histogram, summed into a
// float64 [3] state per shard (flushed to zero, below the edge, at or above
// it): `state_name`, then `state_name@1`, ... (appended to `states`). The
// edge is bin_edge_location x the half type's largest value. Returns the
// values tracked (0: no state added).
struct GradientStatisticsBounds {
  double edge = 0, underflow = 0;
};
GradientStatisticsBounds BoundsOf(DType half, double bin_edge_location);
int AddGradientHistograms(ir::Graph& g, DType half, double bin_edge_location,
                          const std::string& state_name, std::vector<std::string>* states,
                          std::string* detail);

// The optimization passes, in order (passes/pipeline.h's
// OptimizationPipeline without its conditions; tests run them one by one).
std::vector<std::unique_ptr<Pass>> OptimizationPasses();

}  // namespace tiller::passes
