// A training session's state: every persistable variable of the program, in
// a buffer the session owns and every compiled step binds. An optimizer
// accumulator that accl*_type makes FLOAT16 is stored as float16; reads,
// writes and checkpoints exchange it as the program declares it (float32).
#pragma once

#include <map>
#include <string>

#include "core/aligned_buffer.h"
#include "ir/graph.h"

namespace tiller::runtime {

struct StateTensor {
  ir::TensorType type;  // as stored (float16 for accumulators accl*_type makes half)
  DType declared;       // as the program declares it: what reads and writes exchange
  AlignedBuffer data;
  bool set = false;
  ir::TensorType declared_type() const { return {declared, type.shape}; }
  // Between the declared dtype and the stored one (float32 <-> float16):
  // `value` holds declared_type().bytes().
  void Store(const void* value);
  void Load(void* value) const;
};

// By name: a sorted map, so every process of a job visits the states in the
// same order.
using StateMap = std::map<std::string, StateTensor>;

}  // namespace tiller::runtime
