// The passes a compilation runs on a step's finished graph (its forward,
// backward and update parts), as two pipelines built from the compile
// options and the devices' capabilities:
//   rewrites   update placement, replicas' collectives, the optimization
//              passes, recomputation, mixed precision and its statistics,
//              stochastic rounding, half fallback, convolution algorithms
//              and layouts;
//   placement  ops onto devices, copies between them, each device's ops
//              together, stages split over processes (placement verified
//              after each change of devices).
// The compile driver runs both; the split by measured cost
// (compile/measured_cost.h) runs the same rewrites on the graph it times, so
// it times what will be compiled. Entries whose condition is false stay in
// the pipeline ("skipped" in Describe()), so `tiller info --passes` shows
// the whole pipeline and what ran.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "compile/driver.h"
#include "compile/options.h"
#include "passes/pipeline.h"

namespace tiller::compile {

// The rewrites. Their results go into `step` (states sharded over the
// replicas, gradient statistics' accumulators). `devices`: whose
// capabilities decide (half and int8 GEMMs, half kernels, the depthwise
// fusions, blocked convolution layouts).
std::unique_ptr<passes::PassPipeline> RewritePipeline(const CompileOptions& options,
                                                      const std::vector<backend::Device*>& devices,
                                                      CompiledStep* step);

// Placement onto `devices` (host: HostDevice(devices)); the split across
// processes leaves its results in `step`.
std::unique_ptr<passes::PassPipeline> PlacementPipeline(
    const CompileOptions& options, const std::vector<backend::Device*>& devices, int host,
    CompiledStep* step);

// The context both run in: training (a backward and an update part) and
// whether the devices multiply int8 exactly.
passes::PassContext PipelineContext(const std::vector<backend::Device*>& devices, bool training);

}  // namespace tiller::compile
