// Pipeline stages on different processes of an MPI job
// (CompileOptions::device_process). Every process compiles the same whole
// step (the same passes, the same placement and order), then keeps only its
// own devices' ops; each value that crosses between processes becomes a
// message:
//
//   process 0: ... gelu@0 -> send{peer 1, tag t}          (was copy to 1)
//   process 1:       recv{peer 0, tag t} -> matmul@1 ...   (same copy)
//
// Graph outputs computed on one process are sent to every other (each
// process returns the fetches), and a state updated on one process is
// sent, after its update, to every other process that reads it (a weight
// shared by two stages). Transfers are numbered in one walk of the whole
// graph, so every process gives a message the same tag; the executable
// adds the micro-batch (compile/executable.h, SetMessageRound).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tiller::compile {

// Message tags: round x kTransfersPerRound + transfer.
inline constexpr int64_t kTransfersPerRound = int64_t{1} << 16;

struct ProcessSplit {
  int transfers = 0;  // in the whole job's step (the same on every process)
  int sends = 0, recvs = 0;
  int removed = 0;  // ops of the other processes' devices
  // Every state the step updates: the rank computing its update (the one
  // holding its current value after a step).
  std::map<std::string, int> state_owner;
};

// Splits the placed graph (copies inserted, in its final order) for
// process `me`: device d runs on process device_process[d]; `host` is the
// host device (graph inputs and state live there; every process is fed
// the same inputs and holds every state). Fails (kUnimplemented) on an
// output that is a state another process updates.
ProcessSplit SplitAcrossProcesses(ir::Graph& g, const std::vector<int>& device_process, int me,
                                  int host);

}  // namespace tiller::compile
