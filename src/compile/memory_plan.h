// Liveness-based memory planning: every run-time tensor of a device gets an
// offset in that device's arena. Two tensors share bytes only when their lifetimes do
// not overlap. Views (ops whose schema is_view) take their source's bytes and
// extend its lifetime. Weights and folded constants live outside the arena,
// and so do state values (ir::ValueKind::kState), which the caller owns.
//
// An op declaring OpSchema::inplace_input (conv2d's residual) writes its
// result into that input's storage when the input is an intermediate read
// by nothing after it (the result becomes an alias of it, as a view is).
//
// A state update (Graph::SetStateUpdate) is written in place when nothing
// reads the old state after the op producing the new value (or that op is
// the last reader and its schema is inplace_safe): the new value then takes
// the state's storage and never enters the arena. Otherwise the new value is
// kept live to the end and copied into the state after the run.
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
  // New state values written straight into their state's storage: value ->
  // state (for a new value that is a view, such as a reshape, the value it
  // shows).
  std::unordered_map<const ir::Value*, const ir::Value*> in_state;
  // (new value, state) pairs copied after the run, in update order.
  std::vector<std::pair<const ir::Value*, const ir::Value*>> copy_back;
  size_t tensor_bytes = 0;     // arena bytes for tensors
  size_t workspace_bytes = 0;  // one scratch region shared by all kernels, after the tensors
  size_t naive_bytes = 0;      // what one buffer per tensor would take
  size_t arena_bytes() const { return tensor_bytes + workspace_bytes; }
};

// `workspace` holds each op's scratch need, by position in g.ops(). With
// `device` >= 0 only the values living on that device are planned (and only
// its ops' workspace counts): one plan, one arena per device of a placed
// graph (compile/placement.h), `host` being the host device. State updates
// are planned with the host, where placement puts them; -1 plans every
// value in one arena.
MemoryPlan PlanMemory(const ir::Graph& g, const std::vector<size_t>& workspace, int device = -1,
                      int host = 0);

}  // namespace tiller::compile
