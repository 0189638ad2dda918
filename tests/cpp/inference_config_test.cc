// Paddle Inference's Config settings in the C++ API (tiller/predictor.h),
// through the public header only: the ones accepted without effect answer
// what Tiller does, the ones that would change results throw kUnimplemented
// saying why, and Paddle 3's (model_dir, model_prefix) names the files.
// tests/python/inference_api_test.py checks the same names from Python,
// with models.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "tiller/predictor.h"

namespace tiller::inference {
namespace {

namespace fs = std::filesystem;

// The error's kind and message, or kInternal and "(no error)".
std::pair<ErrorKind, std::string> ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.kind(), e.what()};
  }
  return {ErrorKind::kInternal, "(no error)"};
}

void ExpectRefused(const std::function<void()>& f, const std::string& setting,
                   const std::string& why) {
  auto [kind, message] = ErrorOf(f);
  EXPECT_EQ(kind, ErrorKind::kUnimplemented) << message;
  EXPECT_NE(message.find("Config::" + setting), std::string::npos) << message;
  EXPECT_NE(message.find(why), std::string::npos) << message;
}

TEST(InferenceConfigTest, SettingsTillerDoesAnywayAnswerForTiller) {
  Config c;
  c.EnableMemoryOptim();
  EXPECT_TRUE(c.enable_memory_optim());
  c.DisableMKLDNN();  // no other kernels to switch to
  EXPECT_TRUE(c.mkldnn_enabled());
  c.EnableMkldnnInt8();
  EXPECT_TRUE(c.mkldnn_int8_enabled());
  c.SetMKLDNNOp({"conv2d"});
  c.DisableMkldnnFcPasses();
  EXPECT_FALSE(c.mkldnn_fc_passes_disabled());
  c.SetMkldnnCacheCapacity(3);
  EXPECT_EQ(c.mkldnn_cache_capacity(), 3);
  EXPECT_EQ(ErrorOf([&] { c.SetMkldnnCacheCapacity(-1); }).first, ErrorKind::kInvalidArgument);
  EXPECT_FALSE(c.glog_info_disabled());
  c.DisableGlogInfo();
  EXPECT_TRUE(c.glog_info_disabled());
  c.SwitchUseFeedFetchOps(true);
  EXPECT_FALSE(c.use_feed_fetch_ops_enabled());  // as Paddle's
  c.EnableSaveOptimModel(false);
  c.EnableLowPrecisionIO(false);
  c.EnableCustomPasses({});
  c.SetBfloat16Op({});
  EXPECT_FALSE(c.use_gpu());
  EXPECT_FALSE(c.use_xpu());
  EXPECT_FALSE(c.tensorrt_engine_enabled());
  EXPECT_FALSE(c.use_onnxruntime());
}

TEST(InferenceConfigTest, SettingsThatWouldChangeResultsAreRefusedSayingWhy) {
  Config c;
  ExpectRefused([&] { c.EnableUseGpu(100, 0, PrecisionType::kInt8); }, "EnableUseGpu",
                "no int8 GEMM");
  ExpectRefused([&] { c.EnableXpu(); }, "EnableXpu", "no XPU backend");
  ExpectRefused([&] { c.EnableTensorRtEngine(); }, "EnableTensorRtEngine", "TensorRT needs a GPU");
  ExpectRefused([&] { c.EnableONNXRuntime(); }, "EnableONNXRuntime", "not ONNX Runtime");
  ExpectRefused([&] { c.EnableOpenVINOEngine(); }, "EnableOpenVINOEngine", "not OpenVINO");
  ExpectRefused([&] { c.EnableCustomDevice("npu"); }, "EnableCustomDevice", "'npu'");
  ExpectRefused([&] { c.EnableCINN(); }, "EnableCINN", "CINN");
  ExpectRefused([&] { c.DeletePass("fc_fuse_pass"); }, "DeletePass", "fc_fuse_pass");
  ExpectRefused([&] { c.EnableMkldnnInt8({"conv2d"}); }, "EnableMkldnnInt8", "conv2d");
  ExpectRefused([&] { c.SetBfloat16Op({"conv2d"}); }, "SetBfloat16Op", "conv2d");
  ExpectRefused([&] { c.EnableLowPrecisionIO(); }, "EnableLowPrecisionIO", "declares");
  ExpectRefused([&] { c.EnableSaveOptimModel(true); }, "EnableSaveOptimModel", "writes no");
  ExpectRefused([&] { c.Exp_DisableMixedPrecisionOps({"softmax"}); },
                "Exp_DisableMixedPrecisionOps", "softmax");
  ExpectRefused([&] { c.SetPrecision(PrecisionType::kInt8); }, "SetPrecision", "tiller quantize");
  // A refused setting changes nothing.
  EXPECT_FALSE(c.use_gpu());
  EXPECT_EQ(c.precision(), "float32");
}

TEST(InferenceConfigTest, PrecisionTypeAndOptimizationLevel) {
  Config c;
  c.SetPrecision(PrecisionType::kBf16);
  EXPECT_EQ(c.precision(), "bfloat16");
  EXPECT_TRUE(c.mkldnn_bfloat16_enabled());
  c.SetPrecision(PrecisionType::kHalf);
  EXPECT_EQ(c.precision(), "float16");
  c.SetOptimizationLevel(0);
  EXPECT_FALSE(c.ir_optim());
  c.SetOptimizationLevel(4);
  EXPECT_TRUE(c.ir_optim());
  EXPECT_EQ(ErrorOf([&] { c.SetOptimizationLevel(-1); }).first, ErrorKind::kInvalidArgument);
}

TEST(InferenceConfigTest, ModelDirAndPrefixNameTheFilesAsPaddle3) {
  const fs::path dir = fs::temp_directory_path() / ("tiller-config-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "inference.pdmodel") << "x";
  Config legacy(dir.string(), "inference");
  EXPECT_EQ(legacy.prog_file(), (dir / "inference.pdmodel").string());
  EXPECT_EQ(legacy.params_file(), (dir / "inference.pdiparams").string());
  std::ofstream(dir / "inference.json") << "{}";
  Config pir(dir.string(), "inference");  // Paddle 3 prefers the PIR program
  EXPECT_EQ(pir.prog_file(), (dir / "inference.json").string());
  // A real params file keeps the pair as given.
  std::ofstream(dir / "weights.pdiparams") << "x";
  Config files((dir / "inference.json").string(), (dir / "weights.pdiparams").string());
  EXPECT_EQ(files.params_file(), (dir / "weights.pdiparams").string());
  fs::remove_all(dir);

  Config c;
  c.SetProgFile("a.json");
  c.SetParamsFile("a.pdiparams");
  EXPECT_EQ(c.prog_file(), "a.json");
  EXPECT_EQ(c.params_file(), "a.pdiparams");
  c.SetModel("model_dir");
  EXPECT_EQ(c.model_dir(), "model_dir");
  const std::string program = "{}", params;
  c.SetModelBuffer(program.data(), program.size(), params.data(), params.size());
  EXPECT_TRUE(c.model_from_memory());
  EXPECT_EQ(c.prog_buffer(), program);
}

TEST(InferenceConfigTest, SummaryVersionAndMixedPrecisionConversion) {
  Config c("m.json", "m.pdiparams");
  c.SetCpuMathLibraryNumThreads(3);
  const std::string summary = c.Summary();
  EXPECT_NE(summary.find("| cpu_math_thread"), std::string::npos) << summary;
  EXPECT_NE(summary.find("| m.json"), std::string::npos) << summary;
  EXPECT_EQ(GetVersion().rfind("version: ", 0), 0u) << GetVersion();
  auto [kind, message] = ErrorOf([] {
    ConvertToMixedPrecision("m.json", "m.pdiparams", "o.json", "o.pdiparams", PrecisionType::kHalf,
                            PlaceType::kGPU);
  });
  EXPECT_EQ(kind, ErrorKind::kUnimplemented);
  EXPECT_NE(message.find("set the precision when loading it"), std::string::npos) << message;
}

}  // namespace
}  // namespace tiller::inference
