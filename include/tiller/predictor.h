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
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "tiller/data_type.h"
#include "tiller/error.h"

namespace tiller {

namespace inference {

using ::tiller::DataType;
using ::tiller::DataTypeName;
using ::tiller::SizeOf;

class Config {
 public:
  Config() = default;
  // A program file (.pdmodel, .json) and its combined parameter file.
  Config(const std::string& prog_file, const std::string& params_file);
  // A directory: either the legacy form (__model__ + one file per parameter)
  // or one holding model.json / model.pdmodel with model.pdiparams.
  explicit Config(const std::string& model_dir);

  void SetModel(const std::string& prog_file, const std::string& params_file);
  void SetModelDir(const std::string& dir) { model_dir_ = dir; }
  void SetCpuMathLibraryNumThreads(int n) { threads_ = n; }
  int cpu_math_library_num_threads() const { return threads_; }
  const std::string& prog_file() const { return prog_file_; }
  const std::string& params_file() const { return params_file_; }
  const std::string& model_dir() const { return model_dir_; }
  // Loads a custom-op library now (see tiller/custom_op.h), so the model may
  // use the op types it defines; the analogue of IpuStrategy.add_custom_op.
  // Throws tiller::Error naming the path on failure.
  void LoadCustomOpLibrary(const std::string& path);
  // Accepted for Paddle compatibility; devices are chosen with SetDevices.
  void DisableGpu() {}
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
  // Mixed precision (Tiller's own name): "float32" (default), "bfloat16",
  // "float16", or "half" (bfloat16 where the CPU multiplies it natively -
  // AVX512_BF16 or AMX - else float16). matmul, linear and conv2d multiply
  // in the half type with float32 accumulation and results; every other op
  // stays float32; weights are converted once, when the model compiles.
  // oneDNN multiplies bfloat16 only: float16 is stored as float16 and
  // computed in float32 (the compile report says so). An unknown name
  // throws kInvalidArgument.
  void SetPrecision(const std::string& precision);
  const std::string& precision() const { return precision_; }
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
    bool pipelining = false;
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
  std::string precision_ = "float32";
  IpuSettings ipu_;
};

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
