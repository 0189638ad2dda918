// Device profiles: what the planner (compile/plan.h) assumes of a device,
// so a user can check what fits, and how fast it may run, on hardware this
// machine does not have.
//   cpu      this machine's CPU: capacity its physical memory, rates
//            measured now with Tiller's own matmul and add kernels
//   ipu-mk2  Graphcore GC200: 900 MB of in-processor memory
//   ipu-bow  Graphcore Bow IPU: 900 MB, faster clock
//   h200     NVIDIA H200 SXM: 141 GB of HBM3e
// Each has a host memory for tables streamed from it: this machine's
// memory over the CPU's bandwidth (cpu), PCIe 5 x16 (h200), the IPU-M2000's
// streaming memory (ipu-*).
// The accelerators' rates are their spec sheets' peaks for float32 (Tiller
// computes in float32 until mixed precision lands), so their predicted
// times are lower bounds.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tiller::compile {

struct DeviceProfile {
  std::string name;
  std::string description;
  size_t memory_bytes = 0;  // what one device holds
  double flops = 0;         // float32 FLOP/s of matmul / convolution
  double bandwidth = 0;     // bytes/s of memory-bound ops
  double link = 0;          // bytes/s between two devices (copies, collectives)
  bool measured = false;    // rates measured on this machine (cpu)
  // Memory outside the device that embedding tables too large for it are
  // kept in (the IPU's streaming memory, a GPU's host), and bytes/s between
  // it and the device: the planner streams the rows a step touches
  // (compile/plan.h).
  double host_link = 0;
  size_t host_memory_bytes = 0;
};

// The known profile names, in the order above.
std::vector<std::string> DeviceProfileNames();

// "NAME" or "NAME:MEMORY", MEMORY a what-if capacity such as 64MB, 1.5GB or
// 512KiB (decimal MB / GB, binary MiB / GiB). cpu measures its rates with
// `threads` threads (a fraction of a second). Throws kInvalidArgument for
// an unknown name or a bad capacity, listing the names.
DeviceProfile FindDeviceProfile(const std::string& spec, int threads = 1);

}  // namespace tiller::compile
