// Placement: which device runs each op, and the copies between devices.
//
//   ops with (shard, stage, phase)            ops with a device, and
//      x@0 -> gelu -> y        ==placement==>  x@0 -> copy{to 1} -> gelu@1 -> copy{to 0} -> y@0
//
// A value lives on one device: an op's output on the op's device, graph
// inputs and state on the host device (the first host-accessible one). Weights and folded constants
// are readable everywhere (the executable uploads them once to a device that is not
// host-accessible), and so are graph inputs and state to devices that work in host memory. Every
// other crossing goes through a `copy` op, so the memory planner and the executable see each
// device's values alone.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "compile/options.h"
#include "ir/graph.h"

namespace tiller::compile {

// A value readable on every device (weights, constants).
constexpr int kAnyDevice = -2;

// The device a value lives on: its producer's, the host device's for graph
// inputs and state, kAnyDevice for weights and constants.
int HomeDevice(const ir::Value* v, int host);

// The first host-accessible device; an error when there is none.
int HostDevice(const std::vector<backend::Device*>& devices);

// Assigns op->device for every op by `policy` (kByShard: shard i on device
// i; kFirstSupported: the first device in list order with a kernel); views
// go with their source.
// Fails (kUnimplemented) naming the op, the device and the backend's reason
// when the chosen device cannot run it, and (kInvalidArgument) when a shard
// has no device. Returns the number of ops not on device 0.
int PlaceOps(ir::Graph& g, const std::vector<backend::Device*>& devices, PlacementPolicy policy);
// Returns the number of ops not on the host device.

// Inserts a copy op before each first use of a value on another device than
// its home (and before graph outputs and state updates not on the host).
// host_memory[d]: device d reads and writes host memory directly (a CPU
// device): its ops read graph inputs and state where they are, and its
// state updates and graph outputs stay where it computed them (the host
// reads them there); values computed on another device still cross through
// copies, which is how pipeline stages hand over activations. Empty: no
// device does. Returns the number of copies.
int InsertCopies(ir::Graph& g, int host, const std::vector<bool>& host_memory = {});

// Checks that every op is placed on one of `num_devices` devices and that
// values cross devices only through copy ops (host_memory as for
// InsertCopies). Throws kInternal.
void VerifyPlacement(const ir::Graph& g, int num_devices, int host,
                     const std::vector<bool>& host_memory = {});

// Reorders the ops (a topological order, phases forward -> backward ->
// update kept) so that each device's ops of a phase run in as few segments
// as possible: among the ops ready, those of the current phase, on the
// device of the op before, in their old order. A pipeline stage then
// forwards, and takes back gradients, once per micro-batch instead of
// bouncing between devices for a view or a gradient accumulation. Returns
// the number of ops that moved. updates_with_backward (a pipeline that
// updates per micro-batch): a device's update ops may follow its backward
// ops as soon as they are ready, before other devices' backward ops, so a
// stage updates its weights right after its backward pass.
int OrderByDevice(ir::Graph& g, bool updates_with_backward = false);

// host_memory for InsertCopies / VerifyPlacement: each device's
// host_accessible().
std::vector<bool> HostMemoryDevices(const std::vector<backend::Device*>& devices);

}  // namespace tiller::compile
