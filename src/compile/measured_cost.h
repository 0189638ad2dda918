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
};

struct MeasureOptions {
  DeviceSpec device;           // a new device of this spec runs the copy
  int accumulation_steps = 1;  // > 1: gradients go into accumulators
  bool optimize = true;        // the optimization passes (fusions) run first
  int runs = 3;                // timed runs, after one to warm up
};

// Copies the forward graph `g` (forward ops only, as the frontend built
// them), appends what the step will run with them (the backward pass of
// `loss` with respect to `wrt` when `loss` is set, the gradients'
// accumulators, the optimization passes; not the update, which runs once per
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
