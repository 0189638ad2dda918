#include "compile/device_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "compile/executable.h"
#include "core/error.h"
#include "core/memory_cap.h"

namespace tiller::compile {
namespace {

constexpr double kMB = 1e6, kGB = 1e9, kT = 1e12;

// Spec-sheet figures: GC200 (IPU-M2000: 4 x 62.5 TFLOP/s float32, 900 MB
// and 47.5 TB/s of in-processor memory per IPU, 320 GB/s of IPU-Links);
// Bow IPU (87.5 TFLOP/s float32, 65 TB/s); H200 SXM (67 TFLOP/s float32
// without tensor cores, 141 GB at 4.8 TB/s, NVLink 900 GB/s).
// Host memory: an IPU-M2000 has up to 448 GB of streaming memory for its 4
// IPUs (112 GB each) over its 100 Gb/s links (2 x 12.5 GB/s per IPU); an
// H200's host is this machine, over PCIe 5 x16 (64 GB/s each way).
std::vector<DeviceProfile> Accelerators() {
  const auto host = static_cast<size_t>(PhysicalMemoryBytes());
  return {
      {"ipu-mk2", "Graphcore GC200 IPU (spec-sheet float32 peak)", static_cast<size_t>(900 * kMB),
       62.5 * kT, 47.5 * kT, 320 * kGB, false, 25 * kGB, static_cast<size_t>(112 * kGB)},
      {"ipu-bow", "Graphcore Bow IPU (spec-sheet float32 peak)", static_cast<size_t>(900 * kMB),
       87.5 * kT, 65 * kT, 320 * kGB, false, 25 * kGB, static_cast<size_t>(112 * kGB)},
      {"h200", "NVIDIA H200 SXM (spec-sheet float32 peak, no tensor cores)",
       static_cast<size_t>(141 * kGB), 67 * kT, 4.8 * kT, 900 * kGB, false, 64 * kGB, host},
  };
}

// Best of `repeats` timed runs of exe, in seconds.
double BestRun(Executable& exe, int repeats) {
  exe.Run();  // warm-up (first-touch of the arena, kernel caches)
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    exe.Run();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

void Fill(Executable& exe) {
  for (TensorSlot& in : exe.inputs()) {
    float* p = static_cast<float*>(in.data);
    const int64_t n = NumElements(in.type.shape);
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
  }
}

// This machine's CPU with `threads` threads: a 1024^3 matmul for the
// FLOP rate, a 16M-element add (192 MB moved) for the bandwidth.
DeviceProfile MeasureCpu(int threads) {
  DeviceProfile p;
  p.name = "cpu";
  p.measured = true;
  p.memory_bytes = PhysicalMemoryBytes();
  const CompileOptions options = CompileOptions::Cpu(threads);
  {
    constexpr int64_t n = 1024;
    auto g = std::make_unique<ir::Graph>();
    ir::Value* a = g->AddInput("a", {DType::kF32, {n, n}});
    ir::Value* b = g->AddInput("b", {DType::kF32, {n, n}});
    g->AddOutput("c", g->Add1("matmul", {a, b}));
    auto exe = Executable::Build(std::move(g), options);
    Fill(*exe);
    p.flops = 2.0 * n * n * n / BestRun(*exe, 3);
  }
  {
    constexpr int64_t n = int64_t{1} << 24;
    auto g = std::make_unique<ir::Graph>();
    ir::Value* a = g->AddInput("a", {DType::kF32, {n}});
    ir::Value* b = g->AddInput("b", {DType::kF32, {n}});
    g->AddOutput("c", g->Add1("add", {a, b}));
    auto exe = Executable::Build(std::move(g), options);
    Fill(*exe);
    p.bandwidth = 3.0 * n * sizeof(float) / BestRun(*exe, 3);
  }
  // Devices on one CPU copy through its memory, which is also the host
  // memory its streamed tables stay in.
  p.link = p.bandwidth;
  p.host_link = p.bandwidth;
  p.host_memory_bytes = p.memory_bytes;
  p.description = fmt::format("this machine's CPU, {} thread{} per device, rates measured now",
                              threads, threads == 1 ? "" : "s");
  return p;
}

size_t ParseCapacity(const std::string& spec, const std::string& text) {
  return ParseByteSize(text, fmt::format("device profile '{}': capacity", spec));
}

}  // namespace

std::vector<std::string> DeviceProfileNames() {
  std::vector<std::string> names = {"cpu"};
  for (const DeviceProfile& p : Accelerators()) names.push_back(p.name);
  return names;
}

DeviceProfile FindDeviceProfile(const std::string& spec, int threads) {
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  DeviceProfile p;
  if (name == "cpu") {
    p = MeasureCpu(std::max(threads, 1));
  } else {
    bool found = false;
    for (const DeviceProfile& a : Accelerators()) {
      if (a.name == name) {
        p = a;
        found = true;
      }
    }
    if (!found) {
      std::string known;
      for (const std::string& n : DeviceProfileNames()) known += (known.empty() ? "" : ", ") + n;
      Fail(ErrorKind::kInvalidArgument,
           "no device profile '{}' (known: {}; NAME:CAPACITY sets a "
           "what-if capacity)",
           name, known);
    }
  }
  if (colon != std::string::npos) {
    p.memory_bytes = ParseCapacity(spec, spec.substr(colon + 1));
    p.description += fmt::format(", capacity set to {}", FormatBytes(p.memory_bytes));
  }
  return p;
}

}  // namespace tiller::compile
