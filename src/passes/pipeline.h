// A pass pipeline: the passes a compilation runs, in order, as data. Each
// entry is a pass, the condition under which it runs (decided from the
// PassContext and what the builder captured from the options and the
// devices), and the passes it must follow when they are present; the
// pipeline checks that order as it is built. A pipeline is itself a pass,
// so pipelines nest (the optimization passes are one entry of the
// compile driver's). Every pass run is verified and recorded
// (PassRecord), and Describe() lists the pipeline with what ran.
//
// Modelled on XLA's HloPassPipeline (AddPass, invariant checking after each
// pass) and TVM's pass infos (a pass's name and requirements next to it).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace tiller::passes {

// A pass from a function that may say more than its count (`detail`: what
// the report shows under the pass, e.g. the split's stages).
class LambdaPass : public Pass {
 public:
  using Fn = std::function<int(ir::Graph&, const PassContext&, std::string* detail)>;
  LambdaPass(std::string name, std::string summary, Fn fn)
      : name_(std::move(name)), summary_(std::move(summary)), fn_(std::move(fn)) {}
  const char* name() const override { return name_.c_str(); }
  const char* summary() const override { return summary_.c_str(); }
  int Run(ir::Graph& g, const PassContext& ctx) override {
    detail_.clear();
    return fn_(g, ctx, &detail_);
  }
  std::string detail() const override { return detail_; }

 private:
  std::string name_, summary_;
  Fn fn_;
  std::string detail_;
};

class PassPipeline : public Pass {
 public:
  // Whether an entry runs; empty: always.
  using Condition = std::function<bool(const PassContext&)>;
  struct Options {
    Condition enabled;
    // Passes that must run before this one when the pipeline holds them
    // (names; a nested pipeline's passes count by their own names).
    std::vector<std::string> after;
    // false: recorded only when it rewrote something (passes that rarely
    // apply keep the report short).
    bool record_idle = true;
    // `enabled` in words, for Document() ("training, replicas > 1"); empty:
    // always.
    std::string when;
    Options&& When(std::string text) && {
      when = std::move(text);
      return std::move(*this);
    }
  };
  // Options of an entry that must follow `names`.
  static Options After(std::vector<std::string> names, Condition enabled = {}) {
    Options o;
    o.enabled = std::move(enabled);
    o.after = std::move(names);
    return o;
  }

  PassPipeline(std::string name, std::string summary)
      : name_(std::move(name)), summary_(std::move(summary)) {}

  // Appends `pass`. Fails (kInternal) when one of its names (a nested
  // pipeline's passes) is already in the pipeline, or when an earlier entry
  // must follow it (its options.after names it): the order is checked as
  // the pipeline is built, not when it first runs a graph that shows it.
  PassPipeline& Add(std::unique_ptr<Pass> pass, Options options);
  PassPipeline& Add(std::unique_ptr<Pass> pass, Condition enabled = {}) {
    return Add(std::move(pass), After({}, std::move(enabled)));
  }

  const char* name() const override { return name_.c_str(); }
  const char* summary() const override { return summary_.c_str(); }
  // Runs the enabled entries in order; the rewrites of all of them.
  int Run(ir::Graph& g, const PassContext& ctx) override;
  // Run, recording each pass that ran (nested pipelines' passes one by one).
  std::vector<PassRecord> RunRecorded(ir::Graph& g, const PassContext& ctx);

  // The entries' passes, in order, conditions dropped (tests run them one
  // by one).
  std::vector<std::unique_ptr<Pass>> TakePasses() &&;
  // Every pass name, nested pipelines' included, in order.
  std::vector<std::string> PassNames() const;
  // One line per entry: its name, then "skipped" for one whose condition
  // is false in `ctx` (nested pipelines indented); with show_skipped
  // false, the entries that run only: the pipeline as `ctx` runs it.
  std::string Describe(const PassContext& ctx, int indent = 0, bool show_skipped = true) const;
  // Every entry with its summary, when it runs and what it follows (nested
  // pipelines indented): the pipeline as documentation, from the passes
  // themselves.
  std::string Document(int indent = 0) const;

 private:
  struct Entry {
    std::unique_ptr<Pass> pass;
    Options options;
  };
  bool Enabled(const Entry& e, const PassContext& ctx) const {
    return !e.options.enabled || e.options.enabled(ctx);
  }
  std::string name_, summary_;
  std::vector<Entry> entries_;
  // Names an entry must follow that are not in the pipeline yet, with the
  // entry that said so: adding one of them later is refused.
  std::vector<std::pair<std::string, std::string>> awaited_;
};

// The optimization passes (fusions and folds), with their order
// requirements; each is a no-op where its pattern does not occur, as in
// training graphs whose weights are state.
std::unique_ptr<PassPipeline> OptimizationPipeline();

}  // namespace tiller::passes
