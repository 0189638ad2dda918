// The Paddle-Inference-shaped predictor: loads a model once, compiles it per
// set of input shapes (cached), and copies feeds and fetches at the boundary.
#include "tiller/predictor.h"

#include <cstring>
#include <filesystem>

#include "backend/kernel.h"
#include "compile/executable.h"
#include "core/error.h"
#include "frontend/paddle/program.h"
#include "frontend/paddle/translate.h"
#include "ir/op_schema.h"
#include "passes/pass.h"
#include "runtime/api_types.h"
#include "tiller/custom_op.h"

namespace tiller::inference {
namespace {

template <typename T>
DataType TypeOf();
template <>
DataType TypeOf<float>() {
  return DataType::FLOAT32;
}
template <>
DataType TypeOf<double>() {
  return DataType::FLOAT64;
}
template <>
DataType TypeOf<int8_t>() {
  return DataType::INT8;
}
template <>
DataType TypeOf<uint8_t>() {
  return DataType::UINT8;
}
template <>
DataType TypeOf<int16_t>() {
  return DataType::INT16;
}
template <>
DataType TypeOf<int32_t>() {
  return DataType::INT32;
}
template <>
DataType TypeOf<int64_t>() {
  return DataType::INT64;
}
template <>
DataType TypeOf<bool>() {
  return DataType::BOOL;
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
  prog_file_ = prog_file;
  params_file_ = params_file;
}

struct Predictor::Impl {
  Config config;
  paddle::Model model;
  struct Input {
    std::string name;
    DType dtype;
    Shape declared;  // -1 = dynamic
    Shape shape;
    bool has_shape = false, has_data = false;
    AlignedBuffer data;
  };
  std::vector<Input> inputs;
  std::map<std::vector<Shape>, std::unique_ptr<compile::Executable>> cache;
  compile::Executable* current = nullptr;
  bool profiling = false;

  size_t InputIndex(const std::string& name) const {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].name == name) return i;
    }
    std::string names;
    for (const auto& in : inputs) names += (names.empty() ? "" : ", ") + in.name;
    Fail(ErrorKind::kNotFound, "model has no input named '{}' (inputs: {})", name, names);
  }
  size_t OutputIndex(const std::string& name) const {
    const auto& outs = model.program.fetch_names;
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i] == name) return i;
    }
    std::string names;
    for (const auto& n : outs) names += (names.empty() ? "" : ", ") + n;
    Fail(ErrorKind::kNotFound, "model has no output named '{}' (outputs: {})", name, names);
  }

  compile::Executable& Compile() {
    std::vector<Shape> key;
    for (const Input& in : inputs) {
      if (!in.has_data)
        Fail(ErrorKind::kInvalidArgument, "input '{}' was not set before Run()", in.name);
      key.push_back(in.shape);
    }
    return CompileFor(key);
  }

  std::vector<ir::TensorType> FeedTypes(const std::vector<Shape>& shapes) const {
    std::vector<ir::TensorType> feeds;
    for (size_t i = 0; i < inputs.size(); ++i) feeds.push_back({inputs[i].dtype, shapes[i]});
    return feeds;
  }

  std::unique_ptr<ir::Graph> TranslateFor(const std::vector<Shape>& shapes) const {
    paddle::TranslateOptions translate_options;
    translate_options.random_seed = config.random_seed();
    return paddle::Translate(model, FeedTypes(shapes), compile::FoldWithCpuKernels,
                             translate_options);
  }

  // The executable for one set of input shapes, compiled on first use.
  compile::Executable& CompileFor(const std::vector<Shape>& shapes) {
    auto it = cache.find(shapes);
    if (it == cache.end()) {
      auto graph = TranslateFor(shapes);
      if (config.ir_optim()) passes::RunPipeline(*graph, passes::InferencePipeline());
      compile::CompileOptions options;
      options.num_threads = config.cpu_math_library_num_threads();
      it = cache.emplace(shapes, compile::Executable::Build(std::move(graph), options)).first;
      it->second->EnableProfiling(profiling);
    }
    return *it->second;
  }

  // Translation runs per set of input shapes, but an op Tiller cannot run
  // (an attribute value, a dtype) must fail at creation, as Paddle Inference
  // does. So the model is translated once here with the declared shapes:
  // - all static: compiled and cached, so the first Run reuses it and every
  //   error is real (these are the only shapes the model accepts);
  // - dynamic dims: each replaced by 1, then every op's kernel checked for
  //   its dtype (kernel.h). kUnimplemented does not depend on sizes
  //   (attributes, dtypes, compile-time constness, ranks are all real), so it
  //   propagates; other errors can be artefacts of the placeholder (a
  //   reshape or broadcast that only fits the real sizes) and are left for
  //   Run to report with the real shapes.
  // A feed without declared dims (unknown rank) skips the check: a guessed
  // rank could make even kUnimplemented an artefact.
  void CheckAtLoad() {
    std::vector<Shape> shapes;
    bool placeholder = false;
    for (const Input& in : inputs) {
      if (in.declared.empty()) return;
      Shape s = in.declared;
      for (int64_t& d : s) {
        if (d < 0) {
          d = 1;
          placeholder = true;
        }
      }
      shapes.push_back(std::move(s));
    }
    if (!placeholder) {
      CompileFor(shapes);
      return;
    }
    try {
      auto graph = TranslateFor(shapes);
      for (const auto& op : graph->ops()) {
        if (!ir::FindOpSchema(op->type)->is_view) backend::CheckKernelSupports(*op);
      }
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kUnimplemented) throw;
    }
  }
};

Predictor::Predictor(const Config& config) : impl_(std::make_unique<Impl>()) {
  impl_->config = config;
  if (!config.model_dir().empty()) {
    impl_->model = paddle::LoadModel(config.model_dir(), "");
  } else {
    if (config.prog_file().empty())
      Fail(ErrorKind::kInvalidArgument, "Config names no model: set a model file or directory");
    impl_->model = paddle::LoadModel(config.prog_file(), config.params_file());
  }
  const paddle::Program& p = impl_->model.program;
  // Like Paddle Inference, refuse a model with unsupported ops at creation.
  paddle::CheckSupported(p);
  for (const std::string& name : p.feed_names) {
    const paddle::VarInfo* v = p.FindVar(name);
    if (!v) Fail(ErrorKind::kDataLoss, "{}: feed target '{}' has no variable", p.path, name);
    Impl::Input in;
    in.name = name;
    in.dtype = v->dtype;
    in.declared = v->dims;
    impl_->inputs.push_back(std::move(in));
  }
  impl_->CheckAtLoad();
}

Predictor::~Predictor() = default;

std::vector<std::string> Predictor::GetInputNames() const {
  return impl_->model.program.feed_names;
}
std::vector<std::string> Predictor::GetOutputNames() const {
  return impl_->model.program.fetch_names;
}

std::unique_ptr<Tensor> Predictor::GetInputHandle(const std::string& name) {
  size_t i = impl_->InputIndex(name);
  return std::unique_ptr<Tensor>(new Tensor(this, name, true, i));
}

std::unique_ptr<Tensor> Predictor::GetOutputHandle(const std::string& name) {
  size_t i = impl_->OutputIndex(name);
  return std::unique_ptr<Tensor>(new Tensor(this, name, false, i));
}

bool Predictor::Run() {
  compile::Executable& exe = impl_->Compile();
  for (size_t i = 0; i < impl_->inputs.size(); ++i) {
    const Impl::Input& in = impl_->inputs[i];
    compile::TensorSlot& slot = exe.inputs()[i];
    std::memcpy(slot.data, in.data.data(), in.data.size());
  }
  exe.Run();
  impl_->current = &exe;
  return true;
}

std::vector<int64_t> Predictor::GetInputShape(const std::string& name) const {
  return impl_->inputs[impl_->InputIndex(name)].declared;
}
DataType Predictor::GetInputType(const std::string& name) const {
  return ToApi(impl_->inputs[impl_->InputIndex(name)].dtype);
}

Predictor::Summary Predictor::GetSummary() const {
  Summary s;
  compile::Executable* exe = impl_->current;
  if (!exe) Fail(ErrorKind::kInvalidArgument, "GetSummary() needs a Run() first");
  for (const auto& op : exe->graph().ops()) s.num_kernels += op->type != "reshape";
  s.arena_bytes = exe->plan().arena_bytes();
  s.naive_bytes = exe->plan().naive_bytes;
  for (const auto& [name, p] : impl_->model.params) s.weight_bytes += p.data ? p.data->size() : 0;
  s.graph = exe->graph().ToString();
  return s;
}

void Predictor::EnableProfiling(bool on) {
  impl_->profiling = on;
  for (auto& [key, exe] : impl_->cache) exe->EnableProfiling(on);
}

std::vector<std::tuple<std::string, double, int64_t>> Predictor::GetProfile() const {
  std::vector<std::tuple<std::string, double, int64_t>> out;
  if (!impl_->current) return out;
  for (const auto& e : impl_->current->Profile()) out.emplace_back(e.op_type, e.total_ms, e.calls);
  return out;
}

std::map<std::string, int> Predictor::OpHistogram() const {
  std::map<std::string, int> h;
  for (const auto& op : impl_->model.program.ops) ++h[op.type];
  return h;
}

std::shared_ptr<Predictor> CreatePredictor(const Config& config) {
  return std::make_shared<Predictor>(config);
}

// ---- Tensor ----

void Tensor::Reshape(const std::vector<int64_t>& shape) {
  if (!is_input_) Fail(ErrorKind::kInvalidArgument, "output '{}' cannot be reshaped", name_);
  auto& in = owner_->impl_->inputs[index_];
  const Shape& d = in.declared;
  bool ok = d.empty() || d.size() == shape.size();
  for (size_t i = 0; ok && i < d.size(); ++i) ok = d[i] < 0 || d[i] == shape[i];
  for (int64_t s : shape) ok = ok && s >= 0;
  if (!ok)
    Fail(ErrorKind::kInvalidArgument, "input '{}': shape {} does not match the model's {}", name_,
         ShapeToString(shape), ShapeToString(d));
  in.shape = shape;
  in.has_shape = true;
  in.has_data = false;
}

void Tensor::CopyFromCpuBytes(const void* data, DataType type, size_t bytes) {
  if (!is_input_)
    Fail(ErrorKind::kInvalidArgument, "'{}' is an output; copy into inputs only", name_);
  auto& in = owner_->impl_->inputs[index_];
  if (!in.has_shape) {
    bool static_shape = !in.declared.empty();
    for (int64_t s : in.declared) static_shape = static_shape && s >= 0;
    if (!static_shape)
      Fail(ErrorKind::kInvalidArgument, "input '{}' has dynamic shape {}: call Reshape() first",
           name_, ShapeToString(in.declared));
    in.shape = in.declared;
    in.has_shape = true;
  }
  if (FromApi(type) != in.dtype)
    Fail(ErrorKind::kInvalidArgument, "input '{}' expects {}, got {}", name_, DTypeName(in.dtype),
         DataTypeName(type));
  size_t need = static_cast<size_t>(NumElements(in.shape)) * DTypeSize(in.dtype);
  if (bytes != need)
    Fail(ErrorKind::kInvalidArgument, "input '{}' of shape {} needs {} bytes, got {}", name_,
         ShapeToString(in.shape), need, bytes);
  if (in.data.size() != need) in.data.Resize(need);
  if (need) std::memcpy(in.data.data(), data, need);
  in.has_data = true;
}

void Tensor::CopyToCpuBytes(void* data, size_t bytes) const {
  if (is_input_) {
    const auto& in = owner_->impl_->inputs[index_];
    if (bytes != in.data.size()) Fail(ErrorKind::kInvalidArgument, "size mismatch for '{}'", name_);
    std::memcpy(data, in.data.data(), bytes);
    return;
  }
  compile::Executable* exe = owner_->impl_->current;
  if (!exe) Fail(ErrorKind::kInvalidArgument, "output '{}' read before Run()", name_);
  const compile::TensorSlot& slot = exe->outputs()[index_];
  if (bytes != slot.type.bytes())
    Fail(ErrorKind::kInvalidArgument, "output '{}' has {} bytes, buffer has {}", name_,
         slot.type.bytes(), bytes);
  if (bytes) std::memcpy(data, slot.data, bytes);
}

template <typename T>
void Tensor::CopyFromCpu(const T* data) {
  auto& in = owner_->impl_->inputs[index_];
  Shape shape = in.has_shape ? in.shape : in.declared;
  CopyFromCpuBytes(data, TypeOf<T>(),
                   static_cast<size_t>(std::max<int64_t>(NumElements(shape), 0)) * sizeof(T));
}

template <typename T>
void Tensor::CopyToCpu(T* data) const {
  if (TypeOf<T>() != type())
    Fail(ErrorKind::kInvalidArgument, "'{}' is {}, not {}", name_, DataTypeName(type()),
         DataTypeName(TypeOf<T>()));
  CopyToCpuBytes(data, static_cast<size_t>(numel()) * sizeof(T));
}

std::vector<int64_t> Tensor::shape() const {
  if (is_input_) {
    const auto& in = owner_->impl_->inputs[index_];
    return in.has_shape ? in.shape : in.declared;
  }
  compile::Executable* exe = owner_->impl_->current;
  if (!exe) Fail(ErrorKind::kInvalidArgument, "output '{}' has no shape before Run()", name_);
  return exe->outputs()[index_].type.shape;
}

int64_t Tensor::numel() const {
  return NumElements(shape());
}

DataType Tensor::type() const {
  if (is_input_) return ToApi(owner_->impl_->inputs[index_].dtype);
  compile::Executable* exe = owner_->impl_->current;
  if (!exe) Fail(ErrorKind::kInvalidArgument, "output '{}' has no type before Run()", name_);
  return ToApi(exe->outputs()[index_].type.dtype);
}

#define TILLER_INSTANTIATE(T)                          \
  template void Tensor::CopyFromCpu<T>(const T* data); \
  template void Tensor::CopyToCpu<T>(T * data) const;
TILLER_INSTANTIATE(float)
TILLER_INSTANTIATE(double)
TILLER_INSTANTIATE(int8_t)
TILLER_INSTANTIATE(uint8_t)
TILLER_INSTANTIATE(int16_t)
TILLER_INSTANTIATE(int32_t)
TILLER_INSTANTIATE(int64_t)
TILLER_INSTANTIATE(bool)
#undef TILLER_INSTANTIATE

}  // namespace tiller::inference
