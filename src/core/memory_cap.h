// The memory cap: the most bytes a device's compiled program may ask for (its
// arena, and each constant folded while compiling). A model that asks for
// more (a shape of 10^12 elements, say) fails while compiling, naming its
// largest tensor, before anything of that size is allocated. The cap is the
// device's capacity: DeviceOptions::memory_bytes, else TILLER_MEMORY_CAP,
// else the machine's physical memory.
#pragma once

#include <cstddef>
#include <string>

namespace tiller {

// A size such as "64MB", "1.5GB", "512MiB" or "4096B". `what` names the
// value in the error (kInvalidArgument) when `text` is not one.
size_t ParseByteSize(const std::string& text, const std::string& what);

// TILLER_MEMORY_CAP as a size, or 0 when it is unset or empty.
size_t MemoryCapFromEnvironment();

// Where a device's cap of `cap` bytes came from, for messages: the
// environment variable, or a hint that it can lower the cap.
std::string MemoryCapOrigin(size_t cap);

}  // namespace tiller
