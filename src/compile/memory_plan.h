// Liveness-based memory planning: every run-time tensor of a device gets an
// offset in one arena. Two tensors share bytes only when their lifetimes do
// not overlap. Views (ops whose schema is_view) take their source's bytes and
// extend its lifetime. Weights and folded constants live outside the arena.
#pragma once

#include <cstddef>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace tiller::compile {

struct MemoryPlan {
  // Offset in the arena of each planned value (inputs and intermediates that
  // are not views). Views and constants are absent.
  std::unordered_map<const ir::Value*, size_t> offset;
  // For a view, the value whose bytes it reuses (transitively resolved).
  std::unordered_map<const ir::Value*, const ir::Value*> alias_of;
  size_t tensor_bytes = 0;     // arena bytes for tensors
  size_t workspace_bytes = 0;  // one scratch region shared by all kernels, after the tensors
  size_t naive_bytes = 0;      // what one buffer per tensor would take
  size_t arena_bytes() const { return tensor_bytes + workspace_bytes; }
};

// `workspace` holds each op's scratch need, by position in g.ops().
MemoryPlan PlanMemory(const ir::Graph& g, const std::vector<size_t>& workspace);

}  // namespace tiller::compile
