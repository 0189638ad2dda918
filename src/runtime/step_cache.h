// The compiled steps of one model, one per (variant, feed shapes): the
// predictor's single variant, the training session's train and eval steps.
// A step is compiled on first use and kept; lookups after that are a map
// find. The Compiler that built the steps must outlive the cache.
#pragma once

#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "compile/driver.h"
#include "core/shape.h"

namespace tiller::runtime {

class StepCache {
 public:
  using Key = std::pair<int, std::vector<Shape>>;

  // The step for `key`, compiled by `compile` the first time.
  compile::CompiledStep& Get(const Key& key,
                             const std::function<compile::CompiledStep()>& compile) {
    auto it = steps_.find(key);
    if (it == steps_.end()) it = steps_.emplace(key, compile()).first;
    return it->second;
  }
  template <typename Fn>
  void ForEach(Fn fn) {
    for (auto& [key, step] : steps_) fn(step);
  }

 private:
  std::map<Key, compile::CompiledStep> steps_;
};

}  // namespace tiller::runtime
