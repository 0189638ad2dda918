// The memory cap: the most bytes a device's compiled program may ask for (its
// arena, each tensor, and each constant folded while compiling). A model that
// asks for more (a shape of 10^12 elements, say) fails while compiling,
// naming its largest tensor, before anything of that size is allocated. The
// cap is the device's capacity: DeviceOptions::memory_bytes, else
// TILLER_MEMORY_CAP, else the machine's physical memory.
//
// The same cap bounds the host memory that building a program takes before
// any tensor exists (the parsed file, the graph, the passes' work): a
// program of 10^6 ops takes gigabytes there. See HostMemoryScope.
#pragma once

#include <cstddef>
#include <string>

namespace tiller {

// A size such as "64MB", "1.5GB", "512MiB" or "4096B". `what` names the
// value in the error (kInvalidArgument) when `text` is not one.
size_t ParseByteSize(const std::string& text, const std::string& what);

// "900 MB", "1.41 GB", "12.3 MB": decimal units, as the spec sheets count.
std::string FormatBytes(double bytes);

// TILLER_MEMORY_CAP as a size, or 0 when it is unset or empty.
size_t MemoryCapFromEnvironment();

// Where a device's cap of `cap` bytes came from, for messages: the
// environment variable, or a hint that it can lower the cap.
std::string MemoryCapOrigin(size_t cap);

// The machine's physical memory in bytes (0 when unknown).
size_t PhysicalMemoryBytes();

// The cap on host memory: TILLER_MEMORY_CAP, else physical memory.
size_t HostMemoryCap();

// Bounds the host memory that loading, translating and compiling a program
// take. A scope measures how much the process's heap (glibc's mallinfo2:
// bytes in use in its arenas plus mmapped blocks) has grown since it began;
// CheckHostMemory, called along long work, fails with kResourceExhausted once
// that growth passes HostMemoryCap(). Scopes nest: the outermost on the
// thread sets the baseline, so a predictor's load, translation and
// compilation share one budget. The measure is the whole heap: allocations
// by other threads meanwhile count too.
class HostMemoryScope {
 public:
  // `what` names the work in errors (the model's path), or is empty.
  explicit HostMemoryScope(std::string what);
  ~HostMemoryScope();
  HostMemoryScope(const HostMemoryScope&) = delete;
  HostMemoryScope& operator=(const HostMemoryScope&) = delete;

 private:
  friend void CheckHostMemory(const std::string& stage, size_t about_to_allocate);
  std::string what_;
  size_t baseline_ = 0;
  size_t cap_ = 0;
  bool outermost_ = false;
};

// Fails when the innermost budget's growth plus `about_to_allocate` bytes
// passes the cap; `stage` says where the work got to ("parsing the JSON
// program", "translating op 81920 of 1000000"). Without a scope: nothing.
// About 0.1 us: call it every few thousand items, not per item.
void CheckHostMemory(const std::string& stage, size_t about_to_allocate = 0);
}  // namespace tiller
