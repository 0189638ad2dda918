// AlignedBuffer: zeroed, aligned bytes, and freed mappings reused (zeroed
// again) by the next buffer of about their size.
#include "core/aligned_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace tiller {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kHeapOnly = true;  // AddressSanitizer builds keep every buffer on the heap
#else
constexpr bool kHeapOnly = false;
#endif

bool AllZero(const AlignedBuffer& b) {
  for (size_t i = 0; i < b.size(); ++i) {
    if (b.data()[i] != std::byte{0}) return false;
  }
  return true;
}

TEST(AlignedBuffer, FreshBuffersAreZeroedAndAligned) {
  for (size_t bytes : {size_t{1}, size_t{1000}, size_t{3} << 20}) {
    AlignedBuffer b(bytes);
    EXPECT_EQ(b.size(), bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % AlignedBuffer::kAlignment, 0u);
    EXPECT_TRUE(AllZero(b)) << bytes;
  }
}

TEST(AlignedBuffer, AFreedMappingServesTheNextBufferOfItsSizeZeroedAgain) {
  AlignedBuffer::ReleaseCachedMappings();
  const size_t bytes = (size_t{3} << 20) + 123;
  const std::byte* first = nullptr;
  {
    AlignedBuffer a(bytes);
    std::memset(a.data(), 0xAB, a.size());
    first = a.data();
  }
  // A little smaller: the same mapping, every byte of it zero again.
  AlignedBuffer b(bytes - 4096);
  if (!kHeapOnly) {
    EXPECT_EQ(b.data(), first) << "the freed mapping was not reused";
  }
  EXPECT_TRUE(AllZero(b));
  // Resize frees and takes again: still zeroed.
  std::memset(b.data(), 0xCD, b.size());
  b.Resize(bytes);
  EXPECT_TRUE(AllZero(b));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % AlignedBuffer::kAlignment, 0u);
}

TEST(AlignedBuffer, MappingsMuchLargerThanTheRequestAreNotTaken) {
  AlignedBuffer::ReleaseCachedMappings();
  const std::byte* big = nullptr;
  {
    AlignedBuffer a(size_t{12} << 20);
    big = a.data();
  }
  AlignedBuffer small(size_t{2} << 20);  // a sixth of the kept mapping
  if (!kHeapOnly) {
    EXPECT_NE(small.data(), big);
  }
  EXPECT_TRUE(AllZero(small));
  AlignedBuffer::ReleaseCachedMappings();
}

}  // namespace
}  // namespace tiller
