// Tiller's inference API, in the shape of Paddle Inference's C++ API
// (paddle_infer::Config / CreatePredictor / Tensor), so code written against
// Paddle Inference moves over by changing the namespace.
//
//   tiller::inference::Config config("model.json", "model.pdiparams");
//   config.SetCpuMathLibraryNumThreads(2);
//   auto predictor = tiller::inference::CreatePredictor(config);
//   auto ids = predictor->GetInputHandle("input_ids");
//   ids->Reshape({1, 128});
//   ids->CopyFromCpu(data);
//   predictor->Run();
//   auto out = predictor->GetOutputHandle(predictor->GetOutputNames()[0]);
//   std::vector<float> result(out->numel());
//   out->CopyToCpu(result.data());
//
// Errors (bad files, unsupported ops, wrong feeds) throw tiller::Error
// with a message naming the file, op or tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "tiller/data_type.h"
#include "tiller/error.h"
#include "tiller/option_groups.h"

namespace tiller {

namespace inference {

using ::tiller::DataType;
using ::tiller::DataTypeName;
using ::tiller::SizeOf;

// Paddle Inference's PrecisionType (AnalysisConfig::Precision), with its
// values: what Config::SetPrecision and the refused device settings take.
enum class PrecisionType { kFloat32 = 0, kInt8, kHalf, kBf16 };
// Paddle Inference's PlaceType, with its values (convert_to_mixed_precision's
// backend). Tiller's devices are CPU devices (Config::SetDevices).
enum class PlaceType { kUNK = -1, kCPU, kGPU, kXPU, kIPU, kCUSTOM };

// The configuration of a predictor: Paddle Inference's Config
// (paddle_infer::Config), method for method where the setting means
// something on CPU devices. docs/INFERENCE_API.md lists every Paddle name and
// what Tiller does with it. Three kinds of settings:
// - honoured: the model, threads, IR optimization, precision, IPU mode, ...;
// - accepted without effect, because Tiller does it anyway or it cannot
//   change results (memory optimization, oneDNN, logging, executors); their
//   getters say what Tiller does (mkldnn_enabled() is always true);
// - refused: settings that would change what runs or what comes out and
//   that Tiller does not implement (GPU, XPU, TensorRT, ONNX Runtime,
//   OpenVINO, CINN, custom devices, per-op precision lists, passes by
//   name) throw tiller::Error (kUnimplemented) naming the setting and why.
class Config {
 public:
  using Precision = PrecisionType;  // Paddle's AnalysisConfig::Precision

  Config() = default;
  // A program file (.pdmodel, .json) and its combined parameter file; or,
  // as Paddle 3, a directory and a model prefix (see SetModel).
  Config(const std::string& prog_file, const std::string& params_file);
  // A directory: either the legacy form (__model__ + one file per parameter)
  // or one holding model.json / model.pdmodel with model.pdiparams.
  explicit Config(const std::string& model_dir);

  // A program file and its parameter file. When prog_file is a directory
  // and params_file is not a file, they are Paddle 3's (model_dir,
  // model_prefix): DIR/PREFIX.json (or DIR/PREFIX.pdmodel when only that
  // exists) and DIR/PREFIX.pdiparams, which prog_file() and params_file()
  // then return, as Paddle's do.
  void SetModel(const std::string& prog_file, const std::string& params_file);
  // Paddle's SetModel(model_dir): the directory form.
  void SetModel(const std::string& model_dir) { SetModelDir(model_dir); }
  void SetModelDir(const std::string& dir) { model_dir_ = dir; }
  void SetProgFile(const std::string& path) { prog_file_ = path; }
  void SetParamsFile(const std::string& path) { params_file_ = path; }
  // The model from memory: the bytes of a program file (PIR JSON or a
  // legacy ProgramDesc) and of its combined parameter file, copied now.
  // The predictor reads them once and keeps the parameters in memory.
  void SetModelBuffer(const char* prog_buffer, size_t prog_buffer_size, const char* params_buffer,
                      size_t params_buffer_size);
  bool model_from_memory() const { return model_from_memory_; }
  const std::string& prog_buffer() const { return prog_buffer_; }
  const std::string& params_buffer() const { return params_buffer_; }
  void SetCpuMathLibraryNumThreads(int n) { threads_ = n; }
  int cpu_math_library_num_threads() const { return threads_; }
  const std::string& prog_file() const { return prog_file_; }
  const std::string& params_file() const { return params_file_; }
  const std::string& model_dir() const { return model_dir_; }

  // ---- Paddle Inference's CPU settings; each says what it does here ----
  // Every compiled model runs in a liveness-based memory plan.
  void EnableMemoryOptim(bool /*x*/ = true) {}
  bool enable_memory_optim() const { return true; }
  // Tiller's CPU kernels are oneDNN's (and its own): there is no other
  // path to switch to, so disabling changes nothing and the getter stays
  // true. A per-op oneDNN list, the primitive cache's capacity (Tiller
  // compiles once per set of input shapes and keeps it) and the FC fusion
  // switch change speed at most, never results beyond float32 rounding.
  void EnableMKLDNN() {}
  void DisableMKLDNN() {}
  bool mkldnn_enabled() const { return true; }
  void SetMkldnnCacheCapacity(int capacity);
  int mkldnn_cache_capacity() const { return mkldnn_cache_capacity_; }
  void SetMKLDNNOp(const std::vector<std::string>& /*op_types*/) {}
  void DisableMkldnnFcPasses() {}
  bool mkldnn_fc_passes_disabled() const { return false; }
  // A quantized model (Paddle's quantize_linear / dequantize_linear) always
  // runs its int8 ops in int8: enabling it is a no-op and the getter is
  // true. Restricting int8 to some op types is not implemented: a non-empty
  // list throws.
  void EnableMkldnnInt8(const std::vector<std::string>& op_types = {});
  bool mkldnn_int8_enabled() const { return true; }
  bool mkldnn_bfloat16_enabled() const { return precision_.compute == "bfloat16"; }
  // Paddle's list of ops to run in bfloat16: Tiller's mixed precision
  // covers matmul, linear and conv2d, so a non-empty list throws.
  void SetBfloat16Op(const std::vector<std::string>& op_types);
  // Tiller writes no info logs: recorded for glog_info_disabled().
  void DisableGlogInfo() { glog_info_disabled_ = true; }
  bool glog_info_disabled() const { return glog_info_disabled_; }
  // Paddle's profile report: the predictor times every op, and prints the
  // per-op table (Predictor::GetProfile) to stderr when it is destroyed.
  void EnableProfile() { profile_ = true; }
  bool profile_enabled() const { return profile_; }
  // Paddle's switches of its own executors, IR and debugging dumps: Tiller
  // reads PIR and legacy programs alike into its own IR and has one
  // executor. Recorded and reported; no effect.
  void SwitchIrDebug(int x = true, const std::vector<std::string>& /*passes*/ = {}) {
    ir_debug_ = x != 0;
  }
  bool ir_debug() const { return ir_debug_; }
  void EnableNewIR(bool x = true) { new_ir_ = x; }
  bool new_ir_enabled() const { return new_ir_; }
  void EnableNewExecutor(bool x = true) { new_executor_ = x; }
  bool new_executor_enabled() const { return new_executor_; }
  // Inputs are always set by name through handles, and Paddle itself
  // ignores the feed / fetch ops switch (use_feed_fetch_ops_enabled() is
  // always false).
  void SwitchSpecifyInputNames(bool x = true) { specify_input_name_ = x; }
  bool specify_input_name() const { return specify_input_name_; }
  void SwitchUseFeedFetchOps(int /*x*/ = true) {}
  bool use_feed_fetch_ops_enabled() const { return false; }
  // Paddle's optimized-model cache: Tiller compiles at load and keeps no
  // cache on disk, so using one changes nothing; saving one (true) throws,
  // as no file would be written.
  void UseOptimizedModel(bool /*x*/ = true) {}
  void EnableSaveOptimModel(bool save_optimized_model);
  void SetOptimCacheDir(const std::string& dir) { optim_cache_dir_ = dir; }
  const std::string& optim_cache_dir() const { return optim_cache_dir_; }
  // Paddle 3's optimization level, 0 (basic passes only) to 4: 0 is
  // SwitchIrOptim(false), any higher level SwitchIrOptim(true) (Tiller's
  // passes change results by float32 rounding at most). Negative throws.
  void SetOptimizationLevel(int opt_level);
  int optimization_level() const { return optimization_level_; }
  // Paddle's ONNX Runtime is off unless enabled (EnableONNXRuntime throws).
  void DisableONNXRuntime() {}
  bool use_onnxruntime() const { return false; }
  // A table of the settings, as Paddle's Summary().
  std::string Summary() const;

  // ---- Refused: throw tiller::Error (kUnimplemented) saying why ----
  // Paddle's pass names are not Tiller's passes (`tiller info --passes`
  // lists those); SwitchIrOptim(false) turns optimization off.
  void DeletePass(const std::string& pass_name);
  void EnableCustomPasses(const std::vector<std::string>& passes, bool custom_pass_only = false);
  // Half-precision inputs and outputs (x = true), and per-op mixed
  // precision lists (non-empty): Tiller's inputs and outputs stay as the
  // model declares them and its mixed precision covers matmul, linear and
  // conv2d (SetPrecision).
  void EnableLowPrecisionIO(bool x = true);
  void Exp_DisableMixedPrecisionOps(const std::vector<std::string>& black_list);
  void Exp_EnableMixedPrecisionOps(const std::vector<std::string>& white_list);
  // Paddle Inference's GPU switch: devices cuda:<device_id> then the CPU,
  // placed first-supported (what the CUDA backend has no kernel for runs on
  // the CPU), and precision_mode as SetPrecision takes it (kInt8 refused).
  // memory_pool_init_size_mb is recorded for its getter: Paddle's initial
  // pool size, not a cap (Tiller sizes device memory by the memory plan).
  // The GPU is checked when the predictor is made: no driver, no GPU or no
  // GPU device_id fails there naming it. DisableGpu goes back to the CPU.
  void EnableUseGpu(uint64_t memory_pool_init_size_mb, int device_id = 0,
                    PrecisionType precision_mode = PrecisionType::kFloat32);
  // Devices and engines Tiller has no backend for.
  void EnableXpu(int l3_size = 0xfffc00, bool l3_locked = false, bool conv_autotune = false,
                 const std::string& conv_autotune_file = "",
                 const std::string& transformer_encoder_precision = "int16",
                 bool transformer_encoder_adaptive_seqlen = false,
                 bool enable_multi_stream = false);
  void EnableTensorRtEngine(int64_t workspace_size = int64_t{1} << 30, int max_batch_size = 1,
                            int min_subgraph_size = 3,
                            PrecisionType precision = PrecisionType::kFloat32,
                            bool use_static = false, bool use_calib_mode = true,
                            bool use_cuda_graph = false);
  void EnableONNXRuntime();
  void EnableOpenVINOEngine(PrecisionType inference_precision = PrecisionType::kFloat32);
  void EnableCustomDevice(const std::string& device_type, int device_id = 0,
                          PrecisionType precision_mode = PrecisionType::kFloat32);
  void EnableCINN();
  bool use_gpu() const { return use_gpu_; }
  int gpu_device_id() const { return gpu_device_id_; }
  int memory_pool_init_size_mb() const { return memory_pool_init_size_mb_; }
  // What the other devices' getters answer: none is on.
  float fraction_of_gpu_memory_for_pool() const { return 0.0f; }
  bool use_xpu() const { return false; }
  int xpu_device_id() const { return 0; }
  bool tensorrt_engine_enabled() const { return false; }
  bool openvino_engine_enabled() const { return false; }
  bool cinn_enabled() const { return false; }
  // Loads a custom-op library now (see tiller/custom_op.h), so the model may
  // use the op types it defines; the analogue of IpuStrategy.add_custom_op.
  // Throws tiller::Error naming the path on failure.
  void LoadCustomOpLibrary(const std::string& path);
  // Undoes EnableUseGpu (devices back to the CPU alone); nothing otherwise.
  void DisableGpu();
  void SwitchIrOptim(bool on = true) { ir_optim_ = on; }
  // Tiller's own: 3 x 3 float32 convolutions of stride 1 with >= 32
  // channels in and out run Winograd's algorithm (on by default; with
  // SwitchIrOptim on). It multiplies 2-4x less and its results are within
  // float32 rounding of the direct convolution's (relative differences
  // ~1e-6); off: every convolution runs the direct kernels.
  void SwitchWinograd(bool on = true) { winograd_ = on; }
  bool winograd() const { return winograd_; }
  // Seed of random ops (gaussian_random, uniform_random, ...) whose own seed
  // attribute is 0: the IPU `random_seed` option. 0 (default) keeps a fixed
  // per-model seed, so runs repeat; a seed picks another fixed stream.
  void SetRandomSeed(uint64_t seed) { random_seed_ = seed; }
  uint64_t random_seed() const { return random_seed_; }
  bool ir_optim() const { return ir_optim_; }
  // The devices to compile for, by backend name ("cpu", or one a loaded
  // backend library registers), in preference order; default {"cpu"}. Each
  // CPU device gets the math-library thread count. With "first_supported"
  // placement each op runs on the first device with a kernel for it (the
  // others' ops fall back down the list); with "by_shard" (default) op
  // shards (Paddle's ipu_index) map onto devices in order.
  void SetDevices(const std::vector<std::string>& backends);
  const std::vector<std::string>& devices() const { return devices_; }
  void SetPlacement(const std::string& policy);
  const std::string& placement() const { return placement_; }
  // Tiller's own: after every Run(), `path` is rewritten as a Chrome /
  // Perfetto trace (ui.perfetto.dev) of the runs so far: a lane per device
  // (per replica with EnableIpu) with each run's (and micro-batch's)
  // segments, and lanes of copies and collectives; a pipeline that stalls
  // shows as gaps. "" (default): off.
  void EnableTrace(const std::string& path) { trace_path_ = path; }
  const std::string& trace_path() const { return trace_path_; }
  // Tiller's own, for serving (Paddle Inference has no such setting): at
  // creation the predictor compiles for these input shapes and runs `runs`
  // times on zeros, so that the first request pays neither the compile nor
  // the first touch of its memory. An input missing from `shapes` takes its
  // declared dims with a dynamic first dim as 1 (the batch); any other
  // dynamic dim left is an error at creation naming the input. The inputs a
  // caller sets are untouched: a Run() still needs every one. runs 0
  // (default): no warm-up. Throws for runs < 0; with EnableIpu creation
  // refuses it (the IPU mode compiles per replica at its first Run()).
  void EnableWarmup(const std::map<std::string, std::vector<int64_t>>& shapes = {}, int runs = 1);
  int warmup_runs() const { return warmup_runs_; }
  const std::map<std::string, std::vector<int64_t>>& warmup_shapes() const {
    return warmup_shapes_;
  }
  // Tiller's own, for serving (ONNX Runtime's allow_spinning, Intel
  // OpenMP's KMP_BLOCKTIME): how long a CPU device's threads keep spinning
  // after a run before they sleep, so that a request after an idle gap does
  // not wait for them to wake (MobileNetV3 at batch 1: 2.9 ms back to back,
  // 10-16 ms after 50-200 ms asleep). Spinning yields the CPU to any thread
  // with work. -1 (default): 100 ms for a predictor with one device, 0 for
  // more; 0: sleep at once; at most 10000. The environment's
  // TILLER_KEEP_WARM_MS, when set, overrides it.
  void SetCpuKeepWarmMs(int ms);
  int cpu_keep_warm_ms() const { return keep_warm_ms_; }
  // Tiller's own (Paddle's IPU compilation_progress_logger): called while
  // the predictor compiles for a set of input shapes (at creation when
  // they are all static, else at the first Run for them) with
  // (progress, total), from 0 to `total`; empty: none.
  void SetCompileProgressLogger(std::function<void(int progress, int total)> logger,
                                int total = 100);
  const std::function<void(int, int)>& compile_progress_logger() const { return progress_logger_; }
  int compile_progress_total() const { return progress_total_; }
  // Mixed precision (Tiller's own name): "float32" (default), "bfloat16",
  // "float16", or "half" (bfloat16 where the CPU multiplies it natively -
  // AVX512_BF16 or AMX - else float16). matmul, linear and conv2d multiply
  // in the half type with float32 accumulation and results; every other op
  // stays float32; weights are converted once, when the model compiles.
  // oneDNN multiplies bfloat16 only: float16 is stored as float16 and
  // computed in float32 (the compile report says so). An unknown name
  // throws kInvalidArgument.
  void SetPrecision(const std::string& precision);
  // Paddle's precision names: kFloat32 "float32", kHalf "float16", kBf16
  // "bfloat16". kInt8 throws: int8 comes from a quantized model (which
  // runs in int8 as it is; `tiller quantize` makes one).
  void SetPrecision(PrecisionType precision);
  const std::string& precision() const { return precision_.compute; }
  // Paddle Inference's name for SetPrecision("bfloat16").
  void EnableMkldnnBfloat16() { SetPrecision("bfloat16"); }

  // Paddle Inference's IPU settings (paddle_infer::Config::EnableIpu /
  // SetIpuConfig), on CPU devices. A run's inputs hold
  // ipu_batches_per_step x ipu_replica_num micro-batches of
  // ipu_micro_batch_size rows along their first dimension; replica r runs
  // micro-batches k = b * replicas + r on its ipu_device_num devices (the
  // model's ipu_index shards: a model sharded with ipu_shard_guard; an
  // unsharded model is split into stages of about equal cost),
  // pipelined when ipu_enable_pipelining (which needs ipu_batches_per_step
  // >= ipu_device_num). Outputs are every micro-batch's, in input order,
  // along the first dimension: what one device returns for the whole batch.
  // Each of the replica_num x device_num devices takes an equal share of
  // the math-library threads, which must give each at least one.
  void EnableIpu(int ipu_device_num = 1, int ipu_micro_batch_size = 1,
                 bool ipu_enable_pipelining = false, int ipu_batches_per_step = 1);
  // ipu_enable_fp16 is SetPrecision("half"); ipu_enable_half_partial (half
  // precision accumulators) would change results and is refused; the
  // memory proportion and the runtime-executor switch tune the IPU
  // toolchain and have no effect here.
  void SetIpuConfig(bool ipu_enable_fp16 = false, int ipu_replica_num = 1,
                    float ipu_available_memory_proportion = 1.0f,
                    bool ipu_enable_half_partial = false,
                    bool ipu_enable_model_runtime_executor = false);
  // Paddle's custom-op mapping and pattern switches for the IPU toolchain
  // (paddle_infer::Config::SetIpuCustomInfo). Each op entry is {paddle op,
  // popart op, domain, version}: Tiller runs the Paddle op itself (a loaded
  // custom-op library, see LoadCustomOpLibrary), so predictor creation
  // checks that every named Paddle op is one Tiller runs. Patterns tune the
  // toolchain and have no effect here. An entry of another size throws.
  void SetIpuCustomInfo(const std::vector<std::vector<std::string>>& ipu_custom_ops_info = {},
                        const std::map<std::string, bool>& ipu_custom_patterns = {});
  // Paddle Inference's IPU configuration file: one "key,value" per line
  // (spaces ignored, blank lines skipped), keys ipu_device_num,
  // ipu_micro_batch_size, ipu_enable_pipelining, ipu_batches_per_step,
  // ipu_enable_fp16, ipu_replica_num, ipu_available_memory_proportion,
  // ipu_enable_half_partial, ipu_enable_model_runtime_executor,
  // ipu_custom_ops_info ([[paddle_op, popart_op, domain, version], ...]) and
  // ipu_custom_patterns ([[pattern, true|false], ...]). Like Paddle it sets
  // the values without turning the IPU mode on (EnableIpu does). A missing
  // file, an unknown key or a malformed value throws naming the file and
  // line; the settings stay as they were.
  void LoadIpuConfig(const std::string& config_path);
  struct IpuSettings {
    bool enabled = false;
    int device_num = 1, micro_batch_size = 1, batches_per_step = 1, replica_num = 1;
    // ipu_enable_pipelining (tiller/option_groups.h; the schedule is 1F1B).
    PipelineSettings pipeline;
    std::vector<std::vector<std::string>> custom_ops_info;
    std::map<std::string, bool> custom_patterns;
  };
  const IpuSettings& ipu() const { return ipu_; }

 private:
  std::string prog_file_, params_file_, model_dir_;
  int threads_ = 1;
  bool ir_optim_ = true;
  bool winograd_ = true;
  uint64_t random_seed_ = 0;
  std::vector<std::string> devices_ = {"cpu"};
  std::string placement_ = "by_shard";
  std::string trace_path_;
  std::function<void(int, int)> progress_logger_;
  int progress_total_ = 100;
  std::map<std::string, std::vector<int64_t>> warmup_shapes_;
  int warmup_runs_ = 0;
  int keep_warm_ms_ = -1;
  // The group the training session and the planner share
  // (tiller/option_groups.h); inference reads its compute type.
  PrecisionSettings precision_;
  IpuSettings ipu_;
  bool use_gpu_ = false;
  int gpu_device_id_ = 0;
  int memory_pool_init_size_mb_ = 0;
  // Paddle's settings recorded for their getters and Summary().
  bool model_from_memory_ = false;
  std::string prog_buffer_, params_buffer_;
  int mkldnn_cache_capacity_ = 10;  // Paddle's default
  bool glog_info_disabled_ = false, profile_ = false, ir_debug_ = false;
  bool new_ir_ = false, new_executor_ = false, specify_input_name_ = false;
  std::string optim_cache_dir_;
  int optimization_level_ = 2;  // Paddle's default
};

// Paddle Inference's GetVersion(): "version: X.Y.Z" and the engine, one per line.
std::string GetVersion();
// Paddle Inference's ConvertToMixedPrecision writes a float16 / bfloat16
// copy of a model for GPU, XPU or custom devices (and refuses the CPU).
// Tiller writes no converted models: this throws kUnimplemented saying to
// keep the float32 model and set Config::SetPrecision, which converts
// matmul, linear and conv2d weights when the model compiles.
void ConvertToMixedPrecision(const std::string& model_file, const std::string& params_file,
                             const std::string& mixed_model_file,
                             const std::string& mixed_params_file, PrecisionType mixed_precision,
                             PlaceType backend, bool keep_io_types = true);

class Predictor;

// An input or output of a predictor. Inputs: Reshape then CopyFromCpu.
// Outputs: shape() then CopyToCpu after Run().
class Tensor {
 public:
  void Reshape(const std::vector<int64_t>& shape);
  template <typename T>
  void CopyFromCpu(const T* data);
  template <typename T>
  void CopyToCpu(T* data) const;
  // Typed-agnostic copies (Python binding): bytes must match numel*SizeOf(type).
  void CopyFromCpuBytes(const void* data, DataType type, size_t bytes);
  void CopyToCpuBytes(void* data, size_t bytes) const;

  std::vector<int64_t> shape() const;
  int64_t numel() const;
  DataType type() const;
  const std::string& name() const { return name_; }
  // Tensors live in host memory.
  PlaceType place() const { return PlaceType::kCPU; }
  // Paddle's LoD (sequence offsets): Tiller's tensors are dense, so lod()
  // is empty and SetLoD throws for a non-empty one (a model that needs LoD
  // has sequence ops Tiller refuses at load).
  std::vector<std::vector<size_t>> lod() const { return {}; }
  void SetLoD(const std::vector<std::vector<size_t>>& lod);

 private:
  friend class Predictor;
  Tensor(Predictor* owner, std::string name, bool is_input, size_t index)
      : owner_(owner), name_(std::move(name)), is_input_(is_input), index_(index) {}
  Predictor* owner_;
  std::string name_;
  bool is_input_;
  size_t index_;
};

class Predictor {
 public:
  explicit Predictor(const Config& config);
  ~Predictor();
  Predictor(const Predictor&) = delete;
  Predictor& operator=(const Predictor&) = delete;

  std::vector<std::string> GetInputNames() const;
  std::vector<std::string> GetOutputNames() const;
  std::unique_ptr<Tensor> GetInputHandle(const std::string& name);
  std::unique_ptr<Tensor> GetOutputHandle(const std::string& name);
  // Runs the model on the inputs set through the handles. The first run for
  // a set of input shapes compiles (cached; later runs reuse it).
  bool Run();
  // Paddle Inference's Clone: a predictor of the same model for another
  // thread. It shares the loaded program and the parameters' bytes (and the
  // trace file, its lanes named "clone N"); it has its own devices, inputs,
  // compiled steps and arenas, so a predictor and its clones run at the same
  // time on different threads. One predictor is not for two threads at once.
  std::unique_ptr<Predictor> Clone() const;
  // Paddle's memory calls. Tiller's intermediate tensors live in the
  // compiled arenas, planned once per input shapes and reused by every run,
  // so there is nothing to clear or shrink between runs: both keep the
  // memory (TryShrinkMemory returns 0 bytes released).
  void ClearIntermediateTensor() {}
  uint64_t TryShrinkMemory() { return 0; }

  // Tiller extensions.
  // Declared input shape (-1 = dynamic) and dtype.
  std::vector<int64_t> GetInputShape(const std::string& name) const;
  DataType GetInputType(const std::string& name) const;
  // Facts about the executable compiled for the current input shapes (valid
  // after Run): op count, arena/weight bytes, IR dump.
  struct Summary {
    size_t num_kernels = 0;
    size_t arena_bytes = 0;
    size_t naive_bytes = 0;  // one buffer per tensor, for comparison
    size_t weight_bytes = 0;
    std::string graph;
    // What each compile stage changed (autodiff, passes, placement,
    // copies), one line each: what `tiller info --passes` prints.
    std::string compile_report;
    // The compile's pass pipelines as they ran: the passes this compile
    // called for, in order, whether or not they rewrote anything
    // (`tiller info --passes`; `tiller passes` lists every pass and when it
    // runs).
    std::string compile_pipeline;
  };
  Summary GetSummary() const;
  // Per-op-type time over the runs made while profiling was on, sorted by
  // total time (op type, total ms, calls).
  void EnableProfiling(bool on);
  // by_shape: one entry per op type and input shapes.
  std::vector<std::tuple<std::string, double, int64_t>> GetProfile(bool by_shape = false) const;
  // Paddle op histogram of the loaded program.
  std::map<std::string, int> OpHistogram() const;

  struct Impl;

 private:
  friend class Tensor;
  struct CloneTag {};
  Predictor(const Predictor& original, CloneTag);
  std::unique_ptr<Impl> impl_;
};

namespace services {

// Paddle Inference's services::PredictorPool: `size` predictors of one
// config, the first created from it and the others its clones, one for
// each serving thread (Retrive(i) on thread i).
class PredictorPool {
 public:
  explicit PredictorPool(const Config& config, size_t size = 1);
  // The predictor of index `idx` (< size; kInvalidArgument otherwise).
  // Paddle spells it Retrive; Retrieve is the same.
  Predictor* Retrive(size_t idx);
  Predictor* Retrieve(size_t idx) { return Retrive(idx); }
  size_t size() const { return predictors_.size(); }

 private:
  std::vector<std::unique_ptr<Predictor>> predictors_;
};

}  // namespace services

std::shared_ptr<Predictor> CreatePredictor(const Config& config);

}  // namespace inference
}  // namespace tiller
