// Registrations of the CUDA elementwise, cast, transpose and softmax
// kernels (their code: elementwise.cu).
#include <fmt/format.h>

#include "backends/cuda/cuda_device.h"
#include "backends/cuda/kernels/kernels.h"
#include "core/error.h"
#include "ir/ops/op_helpers.h"

namespace tiller::cuda {

std::optional<Elem> ElemOf(DType type) {
  switch (type) {
    case DType::kF32:
      return Elem::kF32;
    case DType::kF16:
      return Elem::kF16;
    case DType::kBF16:
      return Elem::kBF16;
    case DType::kI64:
      return Elem::kI64;
    case DType::kI32:
      return Elem::kI32;
    case DType::kBool:
      return Elem::kBool;
    default:
      return std::nullopt;
  }
}

Indexing BroadcastIndexing(const Shape& out, const Shape& a, const Shape& b) {
  TILLER_CHECK(out.size() <= static_cast<size_t>(kMaxRank), "rank {} over the CUDA kernels' {}",
               out.size(), kMaxRank);
  Indexing ix;
  ix.rank = static_cast<int>(out.size());
  for (int d = 0; d < ix.rank; ++d) ix.dims[d] = out[d];
  const Shape* ins[2] = {&a, &b};
  for (int k = 0; k < 2; ++k) {
    const Shape& s = *ins[k];
    int64_t stride = 1;
    for (size_t i = 0; i < s.size() && i < out.size(); ++i) {
      const size_t d = s.size() - 1 - i, o = out.size() - 1 - i;
      ix.in[k][o] = s[d] == 1 ? 0 : stride;
      stride *= s[d];
    }
  }
  return ix;
}

std::unique_ptr<backend::Kernel> Launching(
    const ir::Op& op, std::function<void(const backend::KernelArgs&, cudaStream_t)> launch,
    size_t workspace) {
  const std::string what = fmt::format("cuda kernel {} (op '{}')", op.type, op.name);
  return std::make_unique<backend::LambdaKernel>(
      [launch = std::move(launch), what](const backend::KernelArgs& args) {
        launch(args, static_cast<cudaStream_t>(CudaStreamOf(args.stream)));
        Check(cudaGetLastError(), what);
      },
      workspace);
}

std::optional<std::string> RankAtMostMax(const ir::Op& op) {
  for (const ir::Value* v : op.inputs) {
    if (v && v->rank() > kMaxRank)
      return fmt::format("rank {} over the CUDA kernels' {}", v->rank(), kMaxRank);
  }
  for (const ir::Value* v : op.outputs) {
    if (v->rank() > kMaxRank)
      return fmt::format("rank {} over the CUDA kernels' {}", v->rank(), kMaxRank);
  }
  return std::nullopt;
}

namespace {

using backend::Signature;

BinaryOp BinaryOf(const ir::Op& op) {
  switch (op.opcode) {
    case ir::Opcode::add:
      return BinaryOp::kAdd;
    case ir::Opcode::sub:
      return BinaryOp::kSub;
    case ir::Opcode::mul:
      return BinaryOp::kMul;
    case ir::Opcode::div:
      return BinaryOp::kDiv;
    case ir::Opcode::max:
      return BinaryOp::kMax;
    case ir::Opcode::min:
      return BinaryOp::kMin;
    default:
      Fail(ErrorKind::kInternal, "cuda: {} is no binary op of the CUDA kernels", op.type);
  }
}

UnaryOp UnaryOf(const ir::Op& op) {
  switch (op.opcode) {
    case ir::Opcode::relu:
      return UnaryOp::kRelu;
    case ir::Opcode::tanh:
      return UnaryOp::kTanh;
    case ir::Opcode::exp:
      return UnaryOp::kExp;
    case ir::Opcode::sigmoid:
      return UnaryOp::kSigmoid;
    case ir::Opcode::neg:
      return UnaryOp::kNeg;
    case ir::Opcode::sqrt:
      return UnaryOp::kSqrt;
    case ir::Opcode::gelu:
      return op.GetBool("approximate") ? UnaryOp::kGeluTanh : UnaryOp::kGelu;
    default:
      Fail(ErrorKind::kInternal, "cuda: {} is no unary op of the CUDA kernels", op.type);
  }
}

std::unique_ptr<backend::Kernel> MakeBinary(const ir::Op& op, backend::Device&) {
  const BinaryOp f = BinaryOf(op);
  const Elem type = *ElemOf(op.inputs[0]->dtype());
  const Indexing ix =
      BroadcastIndexing(op.outputs[0]->shape(), op.inputs[0]->shape(), op.inputs[1]->shape());
  const int64_t n = NumElements(op.outputs[0]->shape());
  return Launching(op, [=](const backend::KernelArgs& a, cudaStream_t s) {
    LaunchBinary(f, type, a.inputs[0], a.inputs[1], a.outputs[0], n, ix, s);
  });
}

std::unique_ptr<backend::Kernel> MakeUnary(const ir::Op& op, backend::Device&) {
  const UnaryOp f = UnaryOf(op);
  const Elem type = *ElemOf(op.inputs[0]->dtype());
  const int64_t n = NumElements(op.outputs[0]->shape());
  return Launching(op, [=](const backend::KernelArgs& a, cudaStream_t s) {
    LaunchUnary(f, type, a.inputs[0], a.outputs[0], n, s);
  });
}

std::unique_ptr<backend::Kernel> MakeScale(const ir::Op& op, backend::Device&) {
  const Elem type = *ElemOf(op.inputs[0]->dtype());
  const int64_t n = NumElements(op.outputs[0]->shape());
  const auto scale = static_cast<float>(op.GetFloat("scale"));
  const auto bias = static_cast<float>(op.GetFloat("bias"));
  const bool after = op.GetBool("bias_after_scale");
  return Launching(op, [=](const backend::KernelArgs& a, cudaStream_t s) {
    LaunchScale(type, a.inputs[0], a.outputs[0], n, scale, bias, after, s);
  });
}

std::unique_ptr<backend::Kernel> MakeEqual(const ir::Op& op, backend::Device&) {
  const Elem type = *ElemOf(op.inputs[0]->dtype());
  const Indexing ix =
      BroadcastIndexing(op.outputs[0]->shape(), op.inputs[0]->shape(), op.inputs[1]->shape());
  const int64_t n = NumElements(op.outputs[0]->shape());
  return Launching(op, [=](const backend::KernelArgs& a, cudaStream_t s) {
    LaunchEqual(type, a.inputs[0], a.inputs[1], static_cast<bool*>(a.outputs[0]), n, ix, s);
  });
}

std::unique_ptr<backend::Kernel> MakeCast(const ir::Op& op, backend::Device&) {
  const Elem from = *ElemOf(op.inputs[0]->dtype()), to = *ElemOf(op.outputs[0]->dtype());
  const int64_t n = NumElements(op.outputs[0]->shape());
  return Launching(op, [=](const backend::KernelArgs& a, cudaStream_t s) {
    LaunchCast(from, to, a.inputs[0], a.outputs[0], n, s);
  });
}

std::unique_ptr<backend::Kernel> MakeTranspose(const ir::Op& op, backend::Device&) {
  const Shape& in = op.inputs[0]->shape();
  const std::vector<int64_t>& perm = op.GetInts("perm");
  const int rank = static_cast<int>(in.size());
  std::vector<int64_t> in_strides(in.size(), 1);
  for (int d = rank - 2; d >= 0; --d) in_strides[d] = in_strides[d + 1] * in[d + 1];
  Indexing ix = BroadcastIndexing(op.outputs[0]->shape(), {});
  for (int d = 0; d < rank; ++d) ix.in[0][d] = in_strides[perm[d] < 0 ? perm[d] + rank : perm[d]];
  const size_t elem = DTypeSize(op.inputs[0]->dtype());
  const int64_t n = NumElements(op.outputs[0]->shape());
  return Launching(op, [=](const backend::KernelArgs& a, cudaStream_t s) {
    LaunchGather(elem, a.inputs[0], a.outputs[0], n, ix, s);
  });
}

// slice: a gather from the first selected element, each output dim
// stepping by its step times the input's stride (negative steps too).
std::unique_ptr<backend::Kernel> MakeSlice(const ir::Op& op, backend::Device&) {
  const Shape& in = op.inputs[0]->shape();
  ir::SliceSpec spec;
  if (!ir::ResolveSlice(in, op, &spec))
    Fail(ErrorKind::kUnimplemented, "cuda kernel slice (op '{}'): bad slice attributes", op.name);
  const int rank = static_cast<int>(in.size());
  std::vector<int64_t> in_strides(in.size(), 1);
  for (int d = rank - 2; d >= 0; --d) in_strides[d] = in_strides[d + 1] * in[d + 1];
  Indexing ix = BroadcastIndexing(spec.out, {});
  int64_t base = 0;
  for (int d = 0; d < rank; ++d) {
    ix.in[0][d] = in_strides[d] * spec.step[d];
    base += spec.start[d] * in_strides[d];
  }
  const size_t elem = DTypeSize(op.inputs[0]->dtype());
  const int64_t n = NumElements(spec.out);
  const int64_t base_bytes = base * static_cast<int64_t>(elem);
  return Launching(op, [=](const backend::KernelArgs& a, cudaStream_t s) {
    LaunchGather(elem, static_cast<const char*>(a.inputs[0]) + base_bytes, a.outputs[0], n, ix, s);
  });
}

std::optional<std::string> SliceAccepts(const ir::Op& op) {
  ir::SliceSpec spec;
  if (!ir::ResolveSlice(op.inputs[0]->shape(), op, &spec))
    return std::string("slice with bad attributes");
  return RankAtMostMax(op);
}

std::unique_ptr<backend::Kernel> MakeSoftmax(const ir::Op& op, backend::Device&) {
  const Shape& shape = op.inputs[0]->shape();
  const int64_t cols = shape.empty() ? 1 : shape.back();
  const int64_t rows = cols ? NumElements(shape) / cols : 0;
  const bool log = op.is(ir::Opcode::log_softmax);
  return Launching(op, [=](const backend::KernelArgs& a, cudaStream_t s) {
    LaunchSoftmax(static_cast<const float*>(a.inputs[0]), static_cast<float*>(a.outputs[0]), rows,
                  cols, log, s);
  });
}

std::optional<std::string> LastAxis(const ir::Op& op) {
  const int64_t rank = op.inputs[0]->rank();
  const int64_t axis = op.GetInt("axis");
  if (rank == 0 || (axis != -1 && axis != rank - 1))
    return fmt::format("axis {} of a rank-{} tensor: the CUDA kernel takes the last axis", axis,
                       rank);
  return std::nullopt;
}

const bool kRegistered = [] {
  const std::vector<DType> floats = {DType::kF32, DType::kF16, DType::kBF16};
  const std::vector<DType> numeric = {DType::kF32, DType::kF16, DType::kBF16, DType::kI64};
  for (const char* op : {"add", "sub", "mul", "max", "min"})
    backend::RegisterKernel(kBackendName, op, Signature("T, T -> T").Where("T", numeric),
                            MakeBinary, RankAtMostMax);
  backend::RegisterKernel(kBackendName, "div", Signature("T, T -> T").Where("T", floats),
                          MakeBinary, RankAtMostMax);
  for (const char* op : {"relu", "tanh", "exp", "sigmoid", "neg", "sqrt", "gelu"})
    backend::RegisterKernel(kBackendName, op, Signature("T -> T").Where("T", floats), MakeUnary);
  backend::RegisterKernel(kBackendName, "scale", Signature("T -> T").Where("T", floats), MakeScale);
  backend::RegisterKernel(kBackendName, "equal",
                          Signature("T, T -> bool").Where("T", {DType::kF32, DType::kI64}),
                          MakeEqual, RankAtMostMax);
  backend::RegisterKernel(kBackendName, "cast",
                          Signature("S -> T").Where("S", floats).Where("T", floats), MakeCast);
  backend::RegisterKernel(kBackendName, "cast", Signature("int64 -> float32"), MakeCast);
  backend::RegisterKernel(kBackendName, "cast",
                          Signature("float32 -> T").Where("T", {DType::kI64, DType::kBool}),
                          MakeCast);
  backend::RegisterKernel(kBackendName, "slice", Signature("T -> T").Where("T", AllDTypes()),
                          MakeSlice, SliceAccepts);
  backend::RegisterKernel(kBackendName, "transpose", Signature("T -> T").Where("T", AllDTypes()),
                          MakeTranspose, RankAtMostMax);
  for (const char* op : {"softmax", "log_softmax"})
    backend::RegisterKernel(kBackendName, op, Signature("float32 -> float32"), MakeSoftmax,
                            LastAxis);
  return true;
}();

}  // namespace
}  // namespace tiller::cuda
