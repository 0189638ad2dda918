// Measured costs for the automatic pipeline split (passes::SplitStagesByCost):
// what each forward op of a step, with the backward ops derived from it,
// takes on the device that will run it, timed rather than estimated from
// flops and bytes (torchgpipe's balance_by_time against its balance_by_size).
// The estimate weighs every memory-bound element alike and a gradient as
// twice its forward op; a measurement sees which ops are memory-bound on
// this machine and what each fusion saved. (On BERT-small both choose the
// same stage bound; a model whose ops the estimate misjudges need not.)
#pragma once

#include <string>
#include <vector>

#include "compile/executable.h"
#include "compile/options.h"
#include "ir/graph.h"

namespace tiller::compile {

struct MeasuredCosts {
  // Per forward op of the graph, in graph order: its mean wall time per run
  // plus that of the backward ops autodiff derived from it (ms).
  std::vector<double> ms;
  double total_ms = 0;  // their sum: one micro-batch's forward (+ backward)
  int runs = 0;         // the timed runs the means are over
  bool cached = false;  // an earlier measurement of the same graph, reused
  // The rewrites (compile/compile_pipeline.h) that changed the timed copy,
  // in order: what the compile will run too.
  std::vector<std::string> rewrites;
};

struct MeasureOptions {
  // The compile's options: a new device of its first device's spec (the
  // default spec where none is given) runs the copy, and its capabilities
  // decide the rewrites; accumulation_steps > 1 puts the gradients into
  // accumulators; the copy is rewritten by the compile's rewrite pipeline
  // (compile/compile_pipeline.h: the optimization passes, recomputation,
  // mixed precision, ...), so what is timed is what is compiled.
  CompileOptions compile;
  int runs = 3;  // timed runs, after one to warm up
};

// Copies the forward graph `g` (forward ops only, as the frontend built
// them), appends what the step will run with them (the backward pass of
// `loss` with respect to `wrt` when `loss` is set, the gradients'
// accumulators, the compile's rewrites; not the update, which runs once per
// window outside the pipeline's steady state), builds the copy alone on one
// new device, runs it with zeroed inputs (states from `states` where given,
// read only; zeroed buffers for the others) and attributes each kernel's
// time to the forward op it derives from.
// Measurements are kept per process by graph text and options, so the
// replicas of one session (each compiling its own copy of the graph) get
// the same costs and the same split. Throws what building or running the
// copy throws (the driver then splits by the estimate and says so).
MeasuredCosts MeasureForwardOpCosts(const ir::Graph& g, const ir::Value* loss,
                                    const std::vector<ir::Value*>& wrt, const StateStorage& states,
                                    const MeasureOptions& options);

}  // namespace tiller::compile
