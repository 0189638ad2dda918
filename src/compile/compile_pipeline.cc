#include "compile/compile_pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>

#include "compile/half_fallback.h"
#include "compile/placement.h"
#include "compile/processes.h"
#include "passes/pass.h"

namespace tiller::compile {
namespace {

using passes::LambdaPass;
using passes::PassContext;
using passes::PassPipeline;

bool Training(const PassContext& ctx) {
  return ctx.training;
}

}  // namespace

passes::PassContext PipelineContext(const std::vector<backend::Device*>& devices, bool training) {
  PassContext ctx;
  ctx.training = training;
  ctx.int8_gemms = DevicesMultiplyInt8(devices);
  return ctx;
}

std::unique_ptr<PassPipeline> RewritePipeline(const CompileOptions& o,
                                              const std::vector<backend::Device*>& devices,
                                              CompiledStep* step) {
  auto p = std::make_unique<PassPipeline>("rewrites", "the finished step's graph rewrites");
  const bool replicas = o.replicas > 1;
  p->Add(std::make_unique<passes::FunctionPass>(
             "place_updates", "update ops -> the shard and stage of the weight they update",
             passes::PlaceUpdateOps),
         PassPipeline::After({}, Training).When("training"));
  p->Add(std::make_unique<LambdaPass>(
             "shard_optimizer_state",
             "optimizer state -> this replica's part (reduce_scatter, all_gather)",
             [o, step](ir::Graph& g, const PassContext&, std::string* detail) {
               return passes::ShardOptimizerState(
                   g, {o.replicas, o.replica_rank, o.collectives.shard_min_elements},
                   &step->sharded_states, detail);
             }),
         PassPipeline::After({"place_updates"}, [replicas,
                                                 shard = o.collectives.shard_optimizer_state](
                                                    const PassContext& ctx) {
           return ctx.training && replicas && shard;
         }).When("training, replicas > 1, shard_optimizer_state"));
  // Training and evaluation steps alike: both read the tables' parts.
  p->Add(std::make_unique<LambdaPass>(
             "shard_embedding_rows",
             "sparse embedding tables -> this replica's rows (one gather_rows for the "
             "lookups, one exchange_rows for the row gradients)",
             [o, step](ir::Graph& g, const PassContext&, std::string* detail) {
               return passes::ShardEmbeddingRows(
                   g, {o.replicas, o.replica_rank, 0, !o.loss_scale.steers()},
                   &step->sharded_states, detail);
             }),
         PassPipeline::After({"shard_optimizer_state"}, [replicas,
                                                         rows = o.collectives.shard_embedding_rows](
                                                            const PassContext&) {
           return replicas && rows;
         }).When("replicas > 1, shard_embedding_rows"));
  const size_t bucket = static_cast<size_t>(o.collectives.all_reduce_bucket_bytes);
  p->Add(std::make_unique<LambdaPass>("bucket_all_reduce",
                                      "gradients' all_reduce ops -> a few messages",
                                      [bucket](ir::Graph& g, const PassContext&, std::string*) {
                                        return passes::BucketAllReduce(g, bucket);
                                      }),
         PassPipeline::After({"shard_embedding_rows"}, [replicas, bucket](const PassContext& ctx) {
           return ctx.training && replicas && bucket > 0;
         }).When("training, replicas > 1, all_reduce_bucket_bytes > 0"));
  const bool overlap = o.collectives.overlap_all_reduce && o.accumulation.steps() == 1;
  p->Add(
      std::make_unique<passes::FunctionPass>(
          "overlap_all_reduce", "all_reduce -> start in the backward pass + wait before the update",
          passes::OverlapAllReduce),
      PassPipeline::After({"bucket_all_reduce"}, [replicas, overlap](const PassContext& ctx) {
        return ctx.training && replicas && overlap;
      }).When("training, replicas > 1, overlap_all_reduce, no accumulation"));
  const bool optimize = o.optimize;
  p->Add(passes::OptimizationPipeline(), PassPipeline::After({}, [optimize](const PassContext&) {
                                           return optimize;
                                         }).When("optimize"));
  // After the fusions: it takes the linears they leave.
  const std::vector<std::string> sparse_weights = o.block_sparse_weights;
  p->Add(std::make_unique<LambdaPass>(
             "block_sparse_weights",
             "matmul|linear(x, W) and matmul(g, W^T), W a weight kept pruned "
             "(block_sparse_weights) -> linear_block_sparse",
             [sparse_weights](ir::Graph& g, const PassContext&, std::string* detail) {
               return passes::BlockSparseWeights(g, sparse_weights, detail);
             }),
         PassPipeline::After({"block_sparse_linear"}, [on = !sparse_weights.empty()](
                                                          const PassContext& ctx) {
           return ctx.training && on;
         }).When("training, block_sparse_weights"));
  const bool all = o.recompute.all;
  p->Add(std::make_unique<LambdaPass>(
             "recompute",
             all ? "backward reads of activations -> recomputed from their stage's inputs"
                 : "backward reads of activations -> recomputed from matmul / conv outputs and "
                   "stage inputs",
             [all](ir::Graph& g, const PassContext&, std::string*) {
               return passes::RecomputeActivations(g, all);
             }),
         PassPipeline::After({}, [recompute = o.recompute.enabled](const PassContext& ctx) {
           return ctx.training && recompute;
         }).When("training, recompute"));
  // Mixed precision is the last of the rewrites: after autodiff (gradient
  // rules see float32 only) and after the passes whose patterns expect
  // float32 operands. A half type no device has a GEMM for (oneDNN 2.6
  // multiplies bfloat16 with AVX-512 only, never float16) is stored as such
  // and computed in float32.
  const bool half = o.precision != Precision::kFloat32;
  passes::MixedPrecisionOptions mp;
  mp.half = o.precision == Precision::kBFloat16 ? DType::kBF16 : DType::kF16;
  mp.compute_in_half = half && DevicesMultiplyIn(devices, mp.half);
  const bool stochastic = o.stochastic_rounding;
  p->Add(std::make_unique<LambdaPass>(
             "mixed_precision", "matmul / linear / conv2d operands -> half, float32 accumulation",
             [mp, stochastic](ir::Graph& g, const PassContext& ctx, std::string* detail) {
               passes::MixedPrecisionOptions m = mp;
               m.fold_casts = !(ctx.training && stochastic);
               return passes::ConvertToMixedPrecision(g, m, detail);
             }),
         PassPipeline::After({"fuse_requantize", "recompute"}, [half](const PassContext&) {
           return half;
         }).When("precision bfloat16 / float16"));
  const DType half_type = mp.half;
  const double edge = o.loss_scale.bin_edge_location;
  const bool plan_only = o.plan_only;
  p->Add(std::make_unique<LambdaPass>(
             "gradient_statistics", "backward values rounded to half -> counts for loss scaling",
             [half_type, edge, plan_only, step](ir::Graph& g, const PassContext&,
                                                std::string* detail) {
               std::vector<std::string> sums;
               const int n = passes::AddGradientHistograms(g, half_type, edge, kGradientHistogram,
                                                           &sums, detail);
               for (const std::string& name : sums) {
                 step->accumulators.push_back({name, AlignedBuffer()});
                 if (!plan_only)
                   step->accumulators.back().data.Resize(3 * sizeof(double));  // zeroed
               }
               return n;
             }),
         PassPipeline::After({"mixed_precision"}, [half, stats = o.loss_scale.counts_gradients()](
                                                      const PassContext& ctx) {
           return ctx.training && half && stats;
         }).When("training, precision bfloat16 / float16, gradient_statistics"));
  // After gradient_statistics, which counts what the casts round.
  const uint64_t seed = o.stochastic_rounding_seed;
  p->Add(std::make_unique<LambdaPass>(
             "stochastic_rounding", "casts to half -> stochastic_cast (seeded, per step)",
             [seed](ir::Graph& g, const PassContext&, std::string* detail) {
               return passes::RoundStochastically(g, seed, detail);
             }),
         PassPipeline::After({"gradient_statistics"}, [stochastic](const PassContext& ctx) {
           return ctx.training && stochastic;
         }).When("training, stochastic_rounding"));
  // A model saved in float16 / bfloat16 runs as saved where a backend has
  // no half kernel for an op.
  PassPipeline::Options widen = PassPipeline::After({"mixed_precision", "stochastic_rounding"});
  widen.record_idle = false;
  widen.when = "an op on half values without a half kernel";
  p->Add(std::make_unique<LambdaPass>(
             "half_fallback", "ops on half values without a half kernel -> float32",
             [devices](ir::Graph& g, const PassContext&, std::string* detail) {
               return RunHalfOpsInFloat32(g, devices, detail);
             }),
         std::move(widen));
  // Then each backend's own rewrites (its fusions, algorithms and
  // layouts), told every device's capabilities; a backend is asked once.
  std::vector<backend::DeviceCaps> caps;
  for (const backend::Device* d : devices) caps.push_back(d->caps());
  backend::BackendPassSettings settings;
  settings.optimize = o.optimize;
  settings.conv_winograd = o.conv_winograd;
  settings.conv_channel_block = o.conv_channel_block;
  std::vector<const backend::Backend*> asked;
  for (const backend::Device* d : devices) {
    if (std::find(asked.begin(), asked.end(), &d->backend()) != asked.end()) continue;
    asked.push_back(&d->backend());
    d->backend().AddPasses(*p, caps, settings);
  }
  return p;
}

std::unique_ptr<PassPipeline> PlacementPipeline(const CompileOptions& o,
                                                const std::vector<backend::Device*>& devices,
                                                int host, CompiledStep* step) {
  auto p = std::make_unique<PassPipeline>("placement", "ops onto devices, copies between them");
  const PlacementPolicy policy = o.placement;
  p->Add(std::make_unique<LambdaPass>(
      "placement", "each op onto a device",
      [devices, policy](ir::Graph& g, const PassContext&, std::string* detail) {
        const int moved = PlaceOps(g, devices, policy);
        std::vector<std::map<std::string, int>> per_device(devices.size());
        for (const auto& op : g.ops()) ++per_device[op->device][op->type];
        for (size_t d = 0; d < devices.size(); ++d) {
          int n = 0;
          for (const auto& [type, c] : per_device[d]) n += c;
          *detail += fmt::format("{}{}: {} ops ({})", detail->empty() ? "" : "; ",
                                 devices[d]->name(), n, FormatOpCounts(per_device[d]));
        }
        return moved;
      }));
  const std::vector<bool> host_memory = HostMemoryDevices(devices);
  p->Add(std::make_unique<LambdaPass>(
             "insert_copies", "a copy where a value crosses devices",
             [host, host_memory](ir::Graph& g, const PassContext&, std::string*) {
               return InsertCopies(g, host, host_memory);
             }),
         PassPipeline::After({"placement"}));
  const bool updates_in_pipeline = o.updates_in_pipeline;
  const bool several = devices.size() > 1;
  p->Add(std::make_unique<LambdaPass>(
             "order_by_device", "each device's ops of a phase together, in order",
             [updates_in_pipeline](ir::Graph& g, const PassContext&, std::string*) {
               return OrderByDevice(g, updates_in_pipeline);
             }),
         PassPipeline::After({"insert_copies"}, [several](const PassContext&) {
           return several;
         }).When("several devices"));
  // An invariant check, recorded only if it ever rewrote (it never does).
  const int n_devices = static_cast<int>(devices.size());
  auto verify = [n_devices, host, host_memory](ir::Graph& g, const PassContext&, std::string*) {
    VerifyPlacement(g, n_devices, host, host_memory);
    return 0;
  };
  PassPipeline::Options check = PassPipeline::After({"order_by_device"});
  check.record_idle = false;
  check.when = "always: an invariant check";
  p->Add(std::make_unique<LambdaPass>("verify_placement", "every op on a device, copies between",
                                      verify),
         check);
  const std::vector<int> device_process = o.device_process;
  const int me = o.process;
  p->Add(std::make_unique<LambdaPass>(
             "split_processes",
             "keep this process's devices' ops; values crossing processes -> send / recv",
             [device_process, me, host, step](ir::Graph& g, const PassContext&, std::string*) {
               ProcessSplit s = SplitAcrossProcesses(g, device_process, me, host);
               step->state_owner = std::move(s.state_owner);
               step->transfers = s.transfers;
               return s.sends + s.recvs + s.removed;
             }),
         PassPipeline::After({"verify_placement"}, [split = !device_process.empty()](
                                                       const PassContext&) {
           return split;
         }).When("devices on several processes (MPI)"));
  PassPipeline::Options check_split = PassPipeline::After(
      {"split_processes"}, [split = !device_process.empty()](const PassContext&) { return split; });
  check_split.record_idle = false;
  check_split.when = "devices on several processes: an invariant check";
  p->Add(
      std::make_unique<LambdaPass>("verify_process_placement",
                                   "every op of this process on a device, copies between", verify),
      check_split);
  return p;
}

}  // namespace tiller::compile
