// custom: calls a loaded custom-op library's compute function
// (include/tiller/custom_op.h) over the planned buffers. Types, pointer
// arrays and the attribute view are prepared at creation, so Run() only
// fills in addresses. print: copies x through and logs it to stderr.
#include <cstdio>

#include "backends/cpu/kernels/kernel_utils.h"
#include "ir/custom_op_registry.h"

namespace tiller::cpu {
namespace {

class CustomKernel : public Kernel {
 public:
  CustomKernel(const ir::Op& op, const TillerCustomOpDef* def)
      : def_(def), name_(op.name), attrs_map_(op.attrs), attrs_{&attrs_map_} {
    auto to_abi = [&](const ir::Value* v, TillerTensorType* t) {
      t->rank = -1;
      if (!v) return;
      if (!custom_op::ToAbi(v->dtype(), &t->dtype) || v->rank() > TILLER_CUSTOM_MAX_RANK)
        Unsupported(op, "{} not in the custom-op ABI", v->type.ToString());
      t->rank = v->rank();
      for (int d = 0; d < t->rank; ++d) t->dims[d] = v->shape()[d];
    };
    in_types_.resize(op.inputs.size());
    out_types_.resize(op.outputs.size());
    for (size_t i = 0; i < op.inputs.size(); ++i) to_abi(op.inputs[i], &in_types_[i]);
    for (size_t i = 0; i < op.outputs.size(); ++i) to_abi(op.outputs[i], &out_types_[i]);
    ins_.resize(op.inputs.size());
    outs_.resize(op.outputs.size());
  }

  void Run(const KernelArgs& args) override {
    for (size_t i = 0; i < ins_.size(); ++i) ins_[i] = args.inputs[i];
    for (size_t i = 0; i < outs_.size(); ++i) outs_[i] = args.outputs[i];
    err_[0] = 0;
    int rc = def_->compute(in_types_.data(), ins_.data(), static_cast<int>(ins_.size()),
                           out_types_.data(), outs_.data(), static_cast<int>(outs_.size()), &attrs_,
                           custom_op::AttrApi(), err_, sizeof(err_));
    if (rc != 0) {
      err_[sizeof(err_) - 1] = 0;
      Fail(ErrorKind::kInternal, "custom op {} ({}) failed: {}", def_->paddle_type, name_, err_);
    }
  }

 private:
  const TillerCustomOpDef* def_;
  std::string name_;
  ir::AttrMap attrs_map_;
  TillerAttrs attrs_;
  std::vector<TillerTensorType> in_types_, out_types_;
  std::vector<const void*> ins_;
  std::vector<void*> outs_;
  char err_[512];
};

std::unique_ptr<Kernel> MakeCustom(const ir::Op& op) {
  const std::string& type = op.GetStr("custom_type");
  const TillerCustomOpDef* def = custom_op::Find(type);
  if (!def) Unsupported(op, "no custom-op library provides '{}'", type);
  return std::make_unique<CustomKernel>(op, def);
}

// Paddle's Print op logs a header and the first `summarize` values (all when
// summarize is -1); Tiller writes that as one stderr line, formatted with
// snprintf into a buffer sized at creation, so Run() allocates nothing.
template <typename T>
char* AppendValues(char* pos, char* end, const void* p, int64_t count) {
  const T* v = static_cast<const T*>(p);
  for (int64_t i = 0; i < count && pos < end; ++i) {
    const char* sep = i ? ", " : "";
    int w;
    if constexpr (std::is_floating_point_v<T>) {
      w = std::snprintf(pos, end - pos, "%s%.6g", sep, static_cast<double>(v[i]));
    } else {
      w = std::snprintf(pos, end - pos, "%s%lld", sep, static_cast<long long>(v[i]));
    }
    pos += std::min<int64_t>(w, end - pos);
  }
  return pos;
}

std::unique_ptr<Kernel> MakePrint(const ir::Op& op) {
  const ir::Value* x = op.inputs[0];
  DType dt = x->dtype();
  int64_t n = NumElements(x->shape());
  int64_t summarize = op.GetInt("summarize");
  int64_t count = summarize < 0 ? n : std::min(n, summarize);
  int64_t first_n = op.GetInt("first_n");
  std::string header;
  const std::string& message = op.GetStr("message");
  if (!message.empty()) header += message + "  ";
  if (op.GetBool("print_tensor_name")) {
    const std::string& var = op.GetStr("var_name");
    header += fmt::format("Variable: {}  ", var.empty() ? x->name : var);
  }
  if (op.GetBool("print_tensor_type")) header += fmt::format("dtype: {}  ", DTypeName(dt));
  if (op.GetBool("print_tensor_shape"))
    header += fmt::format("shape: {}  ", ShapeToString(x->shape()));
  header += "data: [";
  size_t bytes = x->bytes();
  struct State {
    std::vector<char> buf;
    int64_t runs = 0;
  };
  auto st = std::make_shared<State>();
  st->buf.resize(header.size() + static_cast<size_t>(count) * 32 + 16);
  std::memcpy(st->buf.data(), header.data(), header.size());
  size_t hlen = header.size();
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    if (args.outputs[0] != args.inputs[0]) std::memcpy(args.outputs[0], args.inputs[0], bytes);
    if (first_n >= 0 && st->runs >= first_n) return;
    ++st->runs;
    char* pos = st->buf.data() + hlen;
    char* end = st->buf.data() + st->buf.size() - 8;  // room for ", ...]\n"
    const void* in = args.inputs[0];
    switch (dt) {
      case DType::kF32:
        pos = AppendValues<float>(pos, end, in, count);
        break;
      case DType::kF64:
        pos = AppendValues<double>(pos, end, in, count);
        break;
      case DType::kI32:
        pos = AppendValues<int32_t>(pos, end, in, count);
        break;
      case DType::kI64:
        pos = AppendValues<int64_t>(pos, end, in, count);
        break;
      default:
        pos = AppendValues<bool>(pos, end, in, count);
        break;
    }
    const char* tail = count < n ? ", ...]\n" : "]\n";
    size_t tl = std::strlen(tail);
    std::memcpy(pos, tail, tl);
    std::fwrite(st->buf.data(), 1, static_cast<size_t>(pos - st->buf.data()) + tl, stderr);
  });
}

const bool kRegistered = [] {
  using enum DType;
  // custom: the custom-op ABI's dtypes (custom_op::ToAbi); the library's
  // infer function decides which of them an op accepts. A signature cannot
  // say "each tensor any of these, independently": T covers the first input
  // (absent for ops without inputs) and the kernel checks the other tensors
  // (CustomKernel's to_abi).
  RegisterKernel("custom", MakeCustom,
                 Signature("T?, *... -> *...").Where("T", {kF32, kF64, kI32, kI64, kBool}));
  RegisterKernel("print", MakePrint,
                 Signature("T -> T").Where("T", {kF32, kF64, kI32, kI64, kBool}));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
