#include "ir/grad.h"

#include <cstring>
#include <map>

#include "core/error.h"

namespace tiller::ir {
namespace {
std::map<std::string, GradFn>& Registry() {
  static std::map<std::string, GradFn> registry;
  return registry;
}
}  // namespace

bool RegisterGrad(const std::string& op_type, GradFn fn) {
  bool inserted = Registry().emplace(op_type, std::move(fn)).second;
  TILLER_CHECK(inserted, "gradient of '{}' registered twice", op_type);
  return true;
}

const GradFn* FindGrad(const std::string& op_type) {
  auto it = Registry().find(op_type);
  return it == Registry().end() ? nullptr : &it->second;
}

std::vector<std::string> DifferentiableOps() {
  std::vector<std::string> out;
  for (const auto& [name, fn] : Registry()) out.push_back(name);
  return out;
}

void GradContext::SetInputGrad(size_t i, Value* grad) {
  TILLER_CHECK(i < in_grads_.size(), "{}: input {} out of range", op_.type, i);
  if (!grad || !needs_grad(i)) return;
  TILLER_CHECK(grad->shape() == op_.inputs[i]->shape(),
               "{} ({}): gradient of input {} has shape {}, input has {}", op_.type, op_.name, i,
               ShapeToString(grad->shape()), ShapeToString(op_.inputs[i]->shape()));
  in_grads_[i] = grad;
}

Value* GradContext::Add(const std::string& type, std::vector<Value*> inputs, AttrMap attrs) {
  return g_.Add1(type, std::move(inputs), std::move(attrs), op_.name + ".grad");
}

Value* GradContext::Constant(double value, DType dtype) {
  auto buf = std::make_shared<AlignedBuffer>(DTypeSize(dtype));
  switch (dtype) {
    case DType::kF32:
      *buf->as<float>() = static_cast<float>(value);
      break;
    case DType::kF64:
      *buf->as<double>() = value;
      break;
    case DType::kI64:
      *buf->as<int64_t>() = static_cast<int64_t>(value);
      break;
    case DType::kI32:
      *buf->as<int32_t>() = static_cast<int32_t>(value);
      break;
    default:
      Fail(ErrorKind::kUnimplemented, "gradient constant of dtype {}", DTypeName(dtype));
  }
  return g_.AddData("grad.const", {dtype, {}}, ValueKind::kConstant, buf);
}

Value* GradContext::Reshape(Value* v, const Shape& shape) {
  return Add("reshape", {v}, {{"shape", ShapeAttr(shape)}});
}

Value* GradContext::SumPerChannel(Value* v, const Shape& to) {
  std::vector<int64_t> axes{0};
  for (int i = 2; i < v->rank(); ++i) axes.push_back(i);
  return Reshape(Add("reduce_sum", {v}, {{"axes", axes}, {"keepdim", false}}), to);
}

Value* GradContext::ReduceTo(Value* grad, const Shape& shape) {
  if (grad->shape() == shape) return grad;
  if (NumElements(grad->shape()) == NumElements(shape))
    return Add("reshape", {grad}, {{"shape", std::vector<int64_t>(shape)}});
  const Shape& gs = grad->shape();
  TILLER_CHECK(gs.size() >= shape.size(), "{}: gradient {} cannot reduce to {}", op_.name,
               ShapeToString(gs), ShapeToString(shape));
  size_t lead = gs.size() - shape.size();
  std::vector<int64_t> axes;
  for (size_t i = 0; i < gs.size(); ++i) {
    if (i < lead || (shape[i - lead] == 1 && gs[i] != 1)) axes.push_back(static_cast<int64_t>(i));
  }
  Value* r = axes.empty() ? grad : Add("reduce_sum", {grad}, {{"axes", axes}, {"keepdim", true}});
  if (r->shape() != shape) r = Add("reshape", {r}, {{"shape", std::vector<int64_t>(shape)}});
  return r;
}

}  // namespace tiller::ir
