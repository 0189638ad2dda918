// The CUDA backend where there is no GPU (CI): it loads on demand, its
// kernels are registered with the conditions placement reads, and asking for
// a GPU device fails with a message saying why. The kernels' results are
// checked on a GPU machine (tests/gpu/op_check.cc, scripts/gpu_check.sh).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "backend/backend.h"
#include "backend/kernel.h"
#include "core/error.h"
#include "ir/graph.h"
#include "runtime/device_names.h"

namespace tiller {
namespace {

// Loads the backend, or skips where this build has none.
backend::Backend* Cuda() {
  try {
    runtime::EnsureBackend("cuda");
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("built without the CUDA backend"), std::string::npos) << what;
    return nullptr;
  }
  return backend::FindBackend("cuda");
}

TEST(CudaBackend, DeviceNamesSplitIntoBackendAndUnit) {
  EXPECT_EQ(runtime::ParseDeviceName("cuda:0.1").backend, "cuda");
  EXPECT_EQ(runtime::ParseDeviceName("cuda:0.1").unit, "0.1");
  EXPECT_EQ(runtime::ParseDeviceName("cpu").unit, "");
  for (const char* bad : {"cuda:", ":0", ""}) {
    try {
      runtime::ParseDeviceName(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    }
  }
}

TEST(CudaBackend, AMissingLibraryIsNamed) {
  if (backend::FindBackend("cuda")) GTEST_SKIP() << "the CUDA backend is loaded already";
  setenv("TILLER_CUDA_LIBRARY", "/nonexistent/libtiller_cuda.so", 1);
  try {
    runtime::EnsureBackend("cuda");
    ADD_FAILURE() << "a missing library loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnimplemented);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/libtiller_cuda.so is missing"),
              std::string::npos)
        << e.what();
  }
  unsetenv("TILLER_CUDA_LIBRARY");
}

TEST(CudaBackend, PlacementSeesWhatEachKernelTakes) {
  backend::Backend* cuda = Cuda();
  if (!cuda) GTEST_SKIP() << "built without the CUDA backend";
  ir::Graph g;
  ir::Value* x = g.AddInput("x", {DType::kF32, {4, 8}});
  ir::Value* w = g.AddInput("w", {DType::kF32, {8, 3}});
  EXPECT_EQ(cuda->Supports(*g.AddOp("matmul", {x, w}, {}, "plain")), std::nullopt);
  // A fused permutation is the CPU's: the op goes there instead.
  ir::Value* x3 = g.AddInput("x3", {DType::kF32, {2, 4, 8}});
  ir::AttrMap perm;
  perm.Set("perm_a", std::vector<int64_t>{1, 0, 2});
  const auto refused = cuda->Supports(*g.AddOp("matmul", {x3, w}, perm, "permuted"));
  ASSERT_TRUE(refused.has_value());
  EXPECT_NE(refused->find("perm_a"), std::string::npos) << *refused;
  ir::AttrMap first_axis;
  first_axis.Set("axis", int64_t{0});
  EXPECT_TRUE(cuda->Supports(*g.AddOp("softmax", {x}, first_axis, "axis0")).has_value());
  EXPECT_EQ(cuda->Supports(*g.AddOp("softmax", {x}, {}, "last")), std::nullopt);
  // Attention keeps a query row's scores in shared memory: too many keys
  // and the op goes to the CPU.
  ir::AttrMap heads;
  heads.Set("heads", int64_t{2});
  ir::Value* q = g.AddInput("q", {DType::kF32, {1, 4, 64}});
  ir::Value* few = g.AddInput("few", {DType::kF32, {1, 128, 64}});
  ir::Value* many = g.AddInput("many", {DType::kF32, {1, 20000, 64}});
  EXPECT_EQ(cuda->Supports(*g.AddOp("attention", {q, few, few}, heads, "short")), std::nullopt);
  const auto too_long = cuda->Supports(*g.AddOp("attention", {q, many, many}, heads, "long"));
  ASSERT_TRUE(too_long.has_value());
  EXPECT_NE(too_long->find("shared memory"), std::string::npos) << *too_long;
  // No int8 GEMM and no kernel for most ops yet: they fall back.
  ir::Value* i = g.AddInput("i", {DType::kI64, {4}});
  EXPECT_TRUE(cuda->Supports(*g.AddOp("abs", {i}, {}, "abs")).has_value());
}

TEST(CudaBackend, NoGpuIsAClearErrorNotACrash) {
  backend::Backend* cuda = Cuda();
  if (!cuda) GTEST_SKIP() << "built without the CUDA backend";
  try {
    auto device = cuda->CreateDevice(0, {.unit = "0"});
    GTEST_SKIP() << "this machine has a GPU (" << device->capacity_bytes() << " bytes free)";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("cuda:0: no usable GPU"), std::string::npos) << e.what();
  }
  try {
    cuda->CreateDevice(0, {.unit = "zero"});
    ADD_FAILURE() << "cuda:zero was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected cuda:N"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tiller
