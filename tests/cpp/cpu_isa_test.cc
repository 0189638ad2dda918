// core/cpu_isa.h: levels by name, this CPU's report, and TILLER_MAX_ISA's
// refusals (a value that is not a level, a level below this build's).
#include "core/cpu_isa.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/error.h"

namespace tiller {
namespace {

TEST(CpuIsa, LevelsByNameAndAlias) {
  for (IsaLevel l : {IsaLevel::kX86_64, IsaLevel::kX86_64_v2, IsaLevel::kAvx2, IsaLevel::kAvx512,
                     IsaLevel::kAmx})
    EXPECT_EQ(ParseIsaLevel(IsaLevelName(l)), l) << IsaLevelName(l);
  EXPECT_EQ(ParseIsaLevel("x86-64-v3"), IsaLevel::kAvx2);
  EXPECT_EQ(ParseIsaLevel("x86-64-v4"), IsaLevel::kAvx512);
  EXPECT_FALSE(ParseIsaLevel("AVX2").has_value());  // names are exact, as oneDNN's are
  EXPECT_FALSE(ParseIsaLevel("sse9").has_value());
  EXPECT_FALSE(ParseIsaLevel("").has_value());
}

// This test runs here, so this CPU is at least this build's level.
TEST(CpuIsa, UncappedReportChoosesThisCpusLevel) {
  for (const char* cap : {static_cast<const char*>(nullptr), "", "native"}) {
    const CpuIsaReport r = ComputeCpuIsaReport(cap);
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_GE(r.detected, r.compiled);
    EXPECT_EQ(r.chosen, r.detected);
    EXPECT_FALSE(r.cap.has_value());
    EXPECT_NE(r.why.find("this CPU's highest level"), std::string::npos) << r.why;
  }
  const CpuIsaReport r = ComputeCpuIsaReport(nullptr);
#if defined(__x86_64__)
  // Every x86-64-v2 feature of a machine that builds with AVX2.
  if (r.compiled >= IsaLevel::kAvx2) {
    for (const char* f : {"sse4.2", "popcnt", "avx", "avx2", "fma", "f16c"}) {
      EXPECT_NE(std::find(r.features.begin(), r.features.end(), f), r.features.end()) << f;
    }
  }
#endif
}

TEST(CpuIsa, CapAtOrAboveTheBuildIsHonoured) {
  const IsaLevel compiled = ComputeCpuIsaReport(nullptr).compiled;
  const IsaLevel detected = ComputeCpuIsaReport(nullptr).detected;
  for (int l = static_cast<int>(compiled); l <= static_cast<int>(IsaLevel::kAmx); ++l) {
    const auto level = static_cast<IsaLevel>(l);
    const CpuIsaReport r = ComputeCpuIsaReport(IsaLevelName(level));
    EXPECT_TRUE(r.error.empty()) << r.error;
    ASSERT_TRUE(r.cap.has_value());
    EXPECT_EQ(*r.cap, level);
    EXPECT_EQ(r.chosen, std::min(level, detected));
    EXPECT_EQ(r.cap_text, IsaLevelName(level));
  }
}

TEST(CpuIsa, CapThatIsNotALevelIsRefusedWithTheChoices) {
  const CpuIsaReport r = ComputeCpuIsaReport("avx1024");
  EXPECT_NE(r.error.find("TILLER_MAX_ISA='avx1024'"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("avx2 (= x86-64-v3)"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("native"), std::string::npos) << r.error;
}

TEST(CpuIsa, CapBelowTheBuildIsRefusedNotIgnored) {
  const IsaLevel compiled = ComputeCpuIsaReport(nullptr).compiled;
  if (compiled == IsaLevel::kX86_64) GTEST_SKIP() << "a baseline build runs at every level";
  const auto below = static_cast<IsaLevel>(static_cast<int>(compiled) - 1);
  const CpuIsaReport r = ComputeCpuIsaReport(IsaLevelName(below));
  EXPECT_NE(r.error.find(std::string("TILLER_MAX_ISA=") + IsaLevelName(below) + " is below " +
                         IsaLevelName(compiled)),
            std::string::npos)
      << r.error;
}

TEST(CpuIsa, LibraryChoicesAreRecordedOncePerLibrary) {
  RecordLibraryIsa("test library", "level one");
  RecordLibraryIsa("test library", "level two");
  int seen = 0;
  for (const auto& [name, isa] : LibraryIsas())
    if (name == "test library") {
      ++seen;
      EXPECT_EQ(isa, "level two");
    }
  EXPECT_EQ(seen, 1);
}

}  // namespace
}  // namespace tiller
