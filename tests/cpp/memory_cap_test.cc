// The memory cap (core/memory_cap.h): sizes parsed, shapes whose byte count
// overflows refused when a value is made, a program larger than its
// device's cap refused before the arena is allocated, and the host memory
// that building a program takes measured against it.
#include "core/memory_cap.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "backend/backend.h"
#include "compile/executable.h"
#include "core/error.h"
#include "core/shape.h"
#include "ir/graph.h"

namespace tiller {
namespace {

TEST(MemoryCap, SizesParseWithTheirUnits) {
  EXPECT_EQ(ParseByteSize("4096B", "x"), 4096u);
  EXPECT_EQ(ParseByteSize("64MB", "x"), 64000000u);
  EXPECT_EQ(ParseByteSize("1.5GB", "x"), 1500000000u);
  EXPECT_EQ(ParseByteSize("512MiB", "x"), size_t{512} << 20);
  EXPECT_EQ(ParseByteSize("2gib", "x"), size_t{2} << 30);
  for (const char* bad : {"", "lots", "12", "-5GB", "0MB", "12XB", "1e30GB", "nanGB"}) {
    try {
      ParseByteSize(bad, "TILLER_MEMORY_CAP");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(std::string("TILLER_MEMORY_CAP '") + bad + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(MemoryCap, BytesFitUpTo2To62) {
  EXPECT_TRUE(BytesFit({}, 4));
  EXPECT_TRUE(BytesFit({1000000, 1000000}, 4));  // 4 TB: fits the count, not a machine
  EXPECT_TRUE(BytesFit({int64_t{1} << 30, int64_t{1} << 30}, 4));   // 2^62
  EXPECT_FALSE(BytesFit({int64_t{1} << 30, int64_t{1} << 30}, 8));  // 2^63
  EXPECT_FALSE(BytesFit({int64_t{1} << 32, int64_t{1} << 32}, 4));  // wraps to 0
  EXPECT_FALSE(BytesFit({3, int64_t{1} << 40, int64_t{1} << 40}, 1));
  EXPECT_TRUE(BytesFit({int64_t{1} << 40, int64_t{1} << 40, 0}, 4));  // no elements
  EXPECT_TRUE(BytesFit({-1, 768}, 4));                                // unknown dim
}

TEST(MemoryCap, AValueWhoseBytesOverflowIsRefusedByName) {
  ir::Graph g;
  try {
    g.AddInput("huge", {DType::kF32, {int64_t{1} << 32, int64_t{1} << 32}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("tensor 'huge' float32[4294967296, 4294967296] has more "
                                         "than 2^62 bytes"),
              std::string::npos)
        << e.what();
  }
}

TEST(MemoryCap, AProgramOverItsDevicesCapIsRefusedBeforeItsArenaIsAllocated) {
  auto build = [](size_t cap) {
    auto g = std::make_unique<ir::Graph>();
    ir::Value* x = g->AddInput("x", {DType::kF32, {1024, 1024}});  // 4 MiB
    g->AddOutput("y", g->Add1("relu", {x}, {}, "big_relu"));
    compile::CompileOptions options;
    options.devices[0].memory_bytes = cap;
    return compile::Executable::Build(std::move(g), options);
  };
  auto refusal = [&](size_t cap) -> std::string {
    try {
      build(cap);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kResourceExhausted);
      return e.what();
    }
    ADD_FAILURE() << "no error under a cap of " << cap;
    return "";
  };
  EXPECT_NE(build(size_t{64} << 20), nullptr);
  // x and y (4.2 MB each) fit one at a time, not together.
  std::string what = refusal(6000000);
  EXPECT_NE(what.find("cpu:0: the program needs 8.4 MB"), std::string::npos) << what;
  EXPECT_NE(what.find("float32[1024, 1024], 4.2 MB"), std::string::npos) << what;
  EXPECT_NE(what.find("more than the memory cap of 6.0 MB"), std::string::npos) << what;
  // One tensor past the cap is refused before any kernel is made.
  what = refusal(size_t{1} << 20);
  EXPECT_NE(what.find("cpu:0: the program's tensor"), std::string::npos) << what;
  EXPECT_NE(what.find("float32[1024, 1024], 4.2 MB"), std::string::npos) << what;
  EXPECT_NE(what.find("is alone more than the memory cap of 1.0 MB"), std::string::npos) << what;
}

// ASan and TSan allocate outside glibc's heap, where mallinfo2 cannot see.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kGlibcHeap = false;
#else
constexpr bool kGlibcHeap = true;
#endif

TEST(MemoryCap, HostMemoryIsMeasuredFromTheOutermostScope) {
  if (!kGlibcHeap) GTEST_SKIP() << "a sanitizer's allocator replaces glibc's heap";
  setenv("TILLER_MEMORY_CAP", "8MB", 1);
  CheckHostMemory("outside any scope", size_t{1} << 40);  // no scope: nothing checked
  {
    HostMemoryScope outer("model.json");
    CheckHostMemory("nothing allocated yet");
    EXPECT_THROW(CheckHostMemory("about to read", 9000000), Error);
    std::vector<char> five(5000000, 1);
    CheckHostMemory("five MB in");
    {
      // An inner scope keeps the outer baseline: another 5 MB passes 8 MB.
      HostMemoryScope inner("inner");
      std::vector<char> more(5000000, 1);
      try {
        CheckHostMemory("translating op 4096 of 10");
        FAIL() << "no error";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kResourceExhausted);
        const std::string what = e.what();
        EXPECT_NE(what.find("model.json: building the program took 10."), std::string::npos)
            << what;
        EXPECT_NE(what.find("while translating op 4096 of 10: more than the memory cap of 8.0 MB "
                            "(TILLER_MEMORY_CAP=8MB)"),
                  std::string::npos)
            << what;
      }
      EXPECT_EQ(more.back(), 1);  // held until here
    }
    EXPECT_EQ(five.back(), 1);
  }
  {
    // A new scope starts from what the heap holds now.
    std::vector<char> held(9000000, 1);
    HostMemoryScope again("");
    CheckHostMemory("with 9 MB held from before");
    EXPECT_EQ(held.back(), 1);
  }
  unsetenv("TILLER_MEMORY_CAP");
}

TEST(MemoryCap, TheEnvironmentSetsTheCpuDevicesCap) {
  backend::Backend* cpu = backend::FindBackend("cpu");
  ASSERT_NE(cpu, nullptr);
  setenv("TILLER_MEMORY_CAP", "3MB", 1);
  EXPECT_EQ(cpu->CreateDevice(0, {1, 0})->capacity_bytes(), 3000000u);
  EXPECT_EQ(cpu->CreateDevice(0, {1, 5000})->capacity_bytes(), 5000u);  // the option wins
  EXPECT_EQ(MemoryCapOrigin(3000000), "TILLER_MEMORY_CAP=3MB");
  setenv("TILLER_MEMORY_CAP", "many", 1);
  EXPECT_THROW(cpu->CreateDevice(0, {1, 0}), Error);
  unsetenv("TILLER_MEMORY_CAP");
  EXPECT_GT(cpu->CreateDevice(0, {1, 0})->capacity_bytes(), size_t{64} << 20);
}

}  // namespace
}  // namespace tiller
