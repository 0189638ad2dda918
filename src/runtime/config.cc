// Config: the model, the CPU settings and Paddle Inference's other settings,
// honoured, accepted without effect or refused (include/tiller/predictor.h
// says which; docs/INFERENCE_API.md lists them all). The IPU settings are in
// config_ipu.cc.
#include <filesystem>
#include <utility>

#include "backend/backend.h"
#include "core/error.h"
#include "core/shape.h"
#include "runtime/precision.h"
#include "runtime/serving_defaults.h"
#include "tiller/custom_op.h"
#include "tiller/predictor.h"

namespace tiller::inference {

namespace fs = std::filesystem;

namespace {

// Tiller's version (CMakeLists.txt's project VERSION, python/tiller's
// __version__; inference_api_test checks they agree).
constexpr const char* kVersion = "0.1.0";

// Every refusal reads the same: the setting, what it asks for, what to do.
[[noreturn]] void Refuse(const char* setting, const std::string& why) {
  Fail(ErrorKind::kUnimplemented, "Config::{}: {}", setting, why);
}

constexpr const char* kNoTensorRt =
    "NVIDIA's engine, which Tiller does not use; its CUDA backend runs models on GPUs "
    "(Config::EnableUseGpu)";

std::string Joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool IsFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

}  // namespace

Config::Config(const std::string& prog_file, const std::string& params_file) {
  SetModel(prog_file, params_file);
}
Config::Config(const std::string& model_dir) : model_dir_(model_dir) {}

void Config::LoadCustomOpLibrary(const std::string& path) {
  tiller::LoadCustomOpLibrary(path);
}

void Config::SetModel(const std::string& prog_file, const std::string& params_file) {
  std::error_code ec;
  if (!params_file.empty() && fs::is_directory(prog_file, ec) && !fs::exists(params_file, ec)) {
    // Paddle 3's (model_dir, model_prefix); its PIR program first.
    const fs::path prefix = fs::path(prog_file) / params_file;
    const std::string json = prefix.string() + ".json", pdmodel = prefix.string() + ".pdmodel";
    prog_file_ = IsFile(json) || !IsFile(pdmodel) ? json : pdmodel;
    params_file_ = prefix.string() + ".pdiparams";
    return;
  }
  prog_file_ = prog_file;
  params_file_ = params_file;
}

void Config::SetModelBuffer(const char* prog_buffer, size_t prog_buffer_size,
                            const char* params_buffer, size_t params_buffer_size) {
  if (!prog_buffer || prog_buffer_size == 0)
    Fail(ErrorKind::kInvalidArgument, "Config::SetModelBuffer: the program buffer is empty");
  prog_buffer_.assign(prog_buffer, prog_buffer_size);
  params_buffer_.assign(params_buffer ? params_buffer : "", params_buffer ? params_buffer_size : 0);
  model_from_memory_ = true;
}

void Config::SetDevices(const std::vector<std::string>& backends) {
  if (backends.empty()) Fail(ErrorKind::kInvalidArgument, "SetDevices: no devices given");
  devices_ = backends;
}

void Config::SetPlacement(const std::string& policy) {
  if (policy != "by_shard" && policy != "first_supported")
    Fail(ErrorKind::kInvalidArgument,
         "SetPlacement: unknown policy '{}' (by_shard, first_supported)", policy);
  placement_ = policy;
}

void Config::SetPrecision(const std::string& precision) {
  PrecisionSettings next = precision_;
  next.compute = precision;
  next.Validate("Config::SetPrecision");  // validates now
  precision_ = next;
}

void Config::SetPrecision(PrecisionType precision) {
  switch (precision) {
    case PrecisionType::kFloat32:
      return SetPrecision("float32");
    case PrecisionType::kHalf:
      return SetPrecision("float16");
    case PrecisionType::kBf16:
      return SetPrecision("bfloat16");
    case PrecisionType::kInt8:
      break;
  }
  Refuse("SetPrecision",
         "Int8 is not a compile precision in Tiller: a quantized model (Paddle's "
         "quantize_linear / dequantize_linear) runs its int8 ops in int8 as it is, and "
         "`tiller quantize` makes one from a float32 model");
}

void Config::SetMkldnnCacheCapacity(int capacity) {
  if (capacity < 0)
    Fail(ErrorKind::kInvalidArgument,
         "Config::SetMkldnnCacheCapacity: capacity must be >= 0, got {}", capacity);
  mkldnn_cache_capacity_ = capacity;
}

void Config::EnableMkldnnInt8(const std::vector<std::string>& op_types) {
  if (!op_types.empty())
    Refuse("EnableMkldnnInt8",
           fmt::format("restricting int8 to op types ({}) is not implemented: Tiller runs every "
                       "quantized op of a quantized model in int8; call it without op types",
                       Joined(op_types)));
}

void Config::SetBfloat16Op(const std::vector<std::string>& op_types) {
  if (!op_types.empty())
    Refuse("SetBfloat16Op",
           fmt::format("a per-op bfloat16 list ({}) is not implemented: Tiller's bfloat16 "
                       "(EnableMkldnnBfloat16 / SetPrecision) covers matmul, linear and conv2d",
                       Joined(op_types)));
}

void Config::EnableSaveOptimModel(bool save_optimized_model) {
  if (save_optimized_model)
    Refuse("EnableSaveOptimModel",
           "Tiller compiles the model when the predictor is created and writes no optimized "
           "Paddle model (`tiller info --passes` shows what the compiler did)");
}

void Config::SetOptimizationLevel(int opt_level) {
  if (opt_level < 0)
    Fail(ErrorKind::kInvalidArgument,
         "Config::SetOptimizationLevel: the level is 0 (basic passes only) to 4, got {}",
         opt_level);
  optimization_level_ = opt_level;
  SwitchIrOptim(opt_level > 0);
}

void Config::DeletePass(const std::string& pass_name) {
  Refuse("DeletePass",
         fmt::format("'{}' names a Paddle pass; Tiller runs its own passes (`tiller info "
                     "--passes` lists them) and cannot leave one out by Paddle's name; "
                     "SwitchIrOptim(false) turns optimization off",
                     pass_name));
}

void Config::EnableCustomPasses(const std::vector<std::string>& passes, bool /*custom_pass_only*/) {
  if (!passes.empty())
    Refuse("EnableCustomPasses",
           fmt::format("Paddle's custom passes ({}) do not run on Tiller's IR", Joined(passes)));
}

void Config::EnableLowPrecisionIO(bool x) {
  if (x)
    Refuse("EnableLowPrecisionIO",
           "inputs and outputs keep the types the model declares; Tiller's mixed precision "
           "(SetPrecision) computes inside the model");
}

void Config::Exp_DisableMixedPrecisionOps(const std::vector<std::string>& black_list) {
  if (!black_list.empty())
    Refuse("Exp_DisableMixedPrecisionOps",
           fmt::format("per-op mixed precision lists ({}) are not implemented: Tiller's mixed "
                       "precision (SetPrecision) covers matmul, linear and conv2d",
                       Joined(black_list)));
}

void Config::Exp_EnableMixedPrecisionOps(const std::vector<std::string>& white_list) {
  if (!white_list.empty())
    Refuse("Exp_EnableMixedPrecisionOps",
           fmt::format("per-op mixed precision lists ({}) are not implemented: Tiller's mixed "
                       "precision (SetPrecision) covers matmul, linear and conv2d",
                       Joined(white_list)));
}

void Config::EnableUseGpu(uint64_t memory_pool_init_size_mb, int device_id,
                          PrecisionType precision_mode) {
  if (device_id < 0)
    Fail(ErrorKind::kInvalidArgument, "Config::EnableUseGpu: device_id must be >= 0, got {}",
         device_id);
  if (precision_mode == PrecisionType::kInt8)
    Refuse("EnableUseGpu",
           "Int8 is not a compile precision in Tiller (a quantized model runs its int8 ops as "
           "it is); the CUDA backend has no int8 GEMM yet");
  // Checked before anything changes: a refused call changes nothing.
  if (precision_mode != PrecisionType::kFloat32) SetPrecision(precision_mode);
  devices_ = {fmt::format("cuda:{}", device_id), "cpu"};
  placement_ = "first_supported";
  use_gpu_ = true;
  gpu_device_id_ = device_id;
  memory_pool_init_size_mb_ =
      static_cast<int>(std::min<uint64_t>(memory_pool_init_size_mb, INT32_MAX));
}

void Config::DisableGpu() {
  if (!use_gpu_) return;
  devices_ = {"cpu"};
  placement_ = "by_shard";
  use_gpu_ = false;
}

void Config::EnableXpu(int, bool, bool, const std::string&, const std::string&, bool, bool) {
  Refuse("EnableXpu", "no XPU backend; Tiller runs on CPU devices (Config::SetDevices)");
}

void Config::EnableTensorRtEngine(int64_t, int, int, PrecisionType, bool, bool, bool) {
  Refuse("EnableTensorRtEngine", std::string("TensorRT needs a GPU and ") + kNoTensorRt);
}

void Config::EnableONNXRuntime() {
  Refuse("EnableONNXRuntime",
         "Tiller runs the Paddle program with its own compiler and kernels, not ONNX Runtime");
}

void Config::EnableOpenVINOEngine(PrecisionType) {
  Refuse("EnableOpenVINOEngine",
         "Tiller runs the Paddle program with its own compiler and kernels, not OpenVINO");
}

void Config::EnableCustomDevice(const std::string& device_type, int, PrecisionType) {
  Refuse("EnableCustomDevice",
         fmt::format("Paddle's custom device '{}' is not a Tiller backend; Tiller's devices are "
                     "backends (load_backend_library) chosen with Config::SetDevices",
                     device_type));
}

void Config::EnableCINN() {
  Refuse("EnableCINN",
         "CINN is Paddle's compiler; Tiller compiles the program itself, for CPU devices");
}

std::string Config::Summary() const {
  std::vector<std::pair<std::string, std::string>> rows;
  auto yes = [](bool b) { return std::string(b ? "true" : "false"); };
  if (model_from_memory_) {
    rows.emplace_back("model_from_memory", "true");
  } else if (!model_dir_.empty()) {
    rows.emplace_back("model_dir", model_dir_);
  } else {
    rows.emplace_back("model_file", prog_file_);
    rows.emplace_back("params_file", params_file_);
  }
  rows.emplace_back("", "");
  rows.emplace_back("cpu_math_thread", std::to_string(threads_));
  rows.emplace_back("cpu_keep_warm_ms", keep_warm_ms_ < 0
                                            ? fmt::format("default ({} with one device, else 0)",
                                                          runtime::kServingKeepWarmMs)
                                            : std::to_string(keep_warm_ms_));
  if (warmup_runs_ > 0) rows.emplace_back("warmup_runs", std::to_string(warmup_runs_));
  rows.emplace_back("enable_mkldnn", "true (always: oneDNN kernels)");
  rows.emplace_back("precision", precision_.compute);
  std::string devices;
  for (const auto& d : devices_) devices += (devices.empty() ? "" : ", ") + d;
  rows.emplace_back("devices", devices);
  rows.emplace_back("placement", placement_);
  rows.emplace_back("", "");
  rows.emplace_back("use_gpu", yes(use_gpu_));
  rows.emplace_back("use_xpu", "false");
  rows.emplace_back("use_ipu", yes(ipu_.enabled));
  if (ipu_.enabled) {
    rows.emplace_back("ipu_device_num", std::to_string(ipu_.device_num));
    rows.emplace_back("ipu_micro_batch_size", std::to_string(ipu_.micro_batch_size));
    rows.emplace_back("ipu_enable_pipelining", yes(ipu_.pipeline.enabled));
    rows.emplace_back("ipu_batches_per_step", std::to_string(ipu_.batches_per_step));
    rows.emplace_back("ipu_replica_num", std::to_string(ipu_.replica_num));
  }
  rows.emplace_back("", "");
  rows.emplace_back("ir_optim", yes(ir_optim_));
  rows.emplace_back("winograd", yes(winograd_));
  rows.emplace_back("ir_debug", yes(ir_debug_));
  rows.emplace_back("memory_optim", "true (always: planned memory)");
  rows.emplace_back("enable_profile", yes(profile_));
  rows.emplace_back("enable_log", yes(!glog_info_disabled_));
  if (!trace_path_.empty()) rows.emplace_back("trace", trace_path_);
  size_t key = 6, value = 5;  // "Option", "Value"
  for (const auto& [k, v] : rows) {
    key = std::max(key, k.size());
    value = std::max(value, v.size());
  }
  const std::string rule =
      "+" + std::string(key + 2, '-') + "+" + std::string(value + 2, '-') + "+\n";
  auto line = [&](const std::string& k, const std::string& v) {
    return fmt::format("| {:<{}} | {:<{}} |\n", k, key, v, value);
  };
  std::string out = "\n" + rule + line("Option", "Value") + rule;
  for (const auto& [k, v] : rows) out += k.empty() ? rule : line(k, v);
  return out + rule;
}

std::string GetVersion() {
  return fmt::format(
      "version: {}\nengine: Tiller, a graph compiler for PaddlePaddle programs "
      "(CPU devices)\n",
      kVersion);
}

void ConvertToMixedPrecision(const std::string& model_file, const std::string&, const std::string&,
                             const std::string&, PrecisionType, PlaceType backend, bool) {
  const char* where = backend == PlaceType::kCPU
                          ? "Paddle itself converts for GPU, XPU and custom devices only, not CPU"
                          : "Tiller has no GPU, XPU or custom-device backend";
  Fail(ErrorKind::kUnimplemented,
       "convert_to_mixed_precision('{}'): Tiller writes no converted models ({}); keep the "
       "float32 model and set the precision when loading it: Config.enable_mkldnn_bfloat16() or "
       "Config.set_precision('bfloat16' | 'float16') converts the matmul, linear and conv2d "
       "weights when the model compiles",
       model_file, where);
}

void Config::SetCompileProgressLogger(std::function<void(int, int)> logger, int total) {
  if (total < 1)
    Fail(ErrorKind::kInvalidArgument, "SetCompileProgressLogger: total must be >= 1, got {}",
         total);
  progress_logger_ = std::move(logger);
  progress_total_ = total;
}

void Config::EnableWarmup(const std::map<std::string, std::vector<int64_t>>& shapes, int runs) {
  if (runs < 0) Fail(ErrorKind::kInvalidArgument, "EnableWarmup: runs must be >= 0, got {}", runs);
  for (const auto& [name, dims] : shapes) {
    for (int64_t d : dims) {
      if (d < 1)
        Fail(ErrorKind::kInvalidArgument,
             "EnableWarmup: input '{}' shape {}: every dim must be >= 1", name,
             ShapeToString(dims));
    }
  }
  warmup_shapes_ = shapes;
  warmup_runs_ = runs;
}

void Config::SetCpuKeepWarmMs(int ms) {
  if (ms < -1 || ms > backend::kMaxKeepWarmMs)
    Fail(ErrorKind::kInvalidArgument,
         "SetCpuKeepWarmMs({}): expected milliseconds from 0 (off) to {}, or -1 for the "
         "default ({} for a predictor with one device, else 0)",
         ms, backend::kMaxKeepWarmMs, runtime::kServingKeepWarmMs);
  keep_warm_ms_ = ms;
}

}  // namespace tiller::inference
