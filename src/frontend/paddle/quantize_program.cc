#include "frontend/paddle/quantize_program.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "framework.pb.h"
#include "frontend/paddle/dtype_codes.h"

namespace tiller::paddle {
namespace {

namespace pb = ::paddle::framework::proto;

// Paddle's defaults for the pairs (bit_length 8: qmax 127).
constexpr float kQmax = 127.0f;

pb::ProgramDesc ReadDesc(const Model& model) {
  const std::string& path = model.program.path;
  if (model.program.format != "pdmodel")
    Fail(ErrorKind::kUnimplemented,
         "{}: quantization writes Paddle's legacy program format and takes a legacy model "
         "(model.pdmodel, as paddle.static.save_inference_model writes with "
         "FLAGS_enable_pir_api=0); this is a {} program",
         path, model.program.format);
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  pb::ProgramDesc desc;
  // ReadProgramDesc parsed the same file when the model was loaded.
  TILLER_CHECK(in && desc.ParseFromString(bytes.str()), "{}: program does not parse", path);
  return desc;
}

// The single argument of input `slot`, or "".
std::string Input(const pb::OpDesc& op, const std::string& slot) {
  for (const auto& v : op.inputs()) {
    if (v.parameter() == slot && v.arguments_size() == 1) return v.arguments(0);
  }
  return "";
}

const pb::OpDesc::Attr* FindAttr(const pb::OpDesc& op, const std::string& name) {
  for (const auto& a : op.attrs()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

bool BoolAttr(const pb::OpDesc& op, const std::string& name) {
  const pb::OpDesc::Attr* a = FindAttr(op, name);
  return a && a->b();
}

std::string Where(const pb::OpDesc& op, int index) {
  return fmt::format("op #{} ({})", index, op.type());
}

pb::VarDesc* AddTensorVar(pb::BlockDesc* block, const std::string& name, pb::VarType::Type dtype,
                          const std::vector<int64_t>& dims, bool persistable) {
  pb::VarDesc* v = block->add_vars();
  v->set_name(name);
  v->set_persistable(persistable);
  v->mutable_type()->set_type(pb::VarType::DENSE_TENSOR);
  pb::VarType::TensorDesc* t = v->mutable_type()->mutable_dense_tensor()->mutable_tensor();
  t->set_data_type(dtype);
  for (int64_t d : dims) t->add_dims(d);
  return v;
}

const pb::VarDesc& VarOf(const pb::BlockDesc& block, const std::string& name) {
  for (const auto& v : block.vars()) {
    if (v.name() == name) return v;
  }
  Fail(ErrorKind::kInternal, "variable '{}' is not declared", name);
}

std::vector<int64_t> DimsOf(const pb::VarDesc& v) {
  const auto& d = v.type().dense_tensor().tensor().dims();
  return {d.begin(), d.end()};
}

void SetIntAttr(pb::OpDesc* op, const std::string& name, int64_t value) {
  pb::OpDesc::Attr* a = op->add_attrs();
  a->set_name(name);
  a->set_type(pb::INT);
  a->set_i(static_cast<int32_t>(value));
}

void AddSlot(google::protobuf::RepeatedPtrField<pb::OpDesc::Var>* slots, const std::string& slot,
             const std::string& arg) {
  pb::OpDesc::Var* v = slots->Add();
  v->set_parameter(slot);
  v->add_arguments(arg);
}

// quantize_linear / dequantize_linear(X, Scale, ZeroPoint) -> Y, as
// Paddle's PTQ writes them.
pb::OpDesc PairOp(const std::string& type, const std::string& x, const std::string& scale,
                  const std::string& zero_point, const std::string& y, int64_t axis) {
  pb::OpDesc op;
  op.set_type(type);
  AddSlot(op.mutable_inputs(), "X", x);
  AddSlot(op.mutable_inputs(), "Scale", scale);
  AddSlot(op.mutable_inputs(), "ZeroPoint", zero_point);
  AddSlot(op.mutable_outputs(), "Y", y);
  SetIntAttr(&op, "bit_length", 8);
  SetIntAttr(&op, "quant_axis", axis);
  return op;
}

ParamTensor FloatTensor(const std::vector<float>& v) {
  ParamTensor t;
  t.dtype = DType::kF32;
  t.dims = {static_cast<int64_t>(v.size())};
  t.data = std::make_shared<AlignedBuffer>(v.size() * sizeof(float));
  std::memcpy(t.data->data(), v.data(), v.size() * sizeof(float));
  return t;
}

ParamTensor ZeroPoints(int64_t n) {
  ParamTensor t;
  t.dtype = DType::kI32;
  t.dims = {n};
  t.data = std::make_shared<AlignedBuffer>(n * sizeof(int32_t));
  std::memset(t.data->data(), 0, n * sizeof(int32_t));
  return t;
}

// Per-channel abs-max quantization of a float32 weight along `axis`: the
// int8 tensor and the channels' ranges (an all-zero channel gets range 1,
// so its scale is never zero).
ParamTensor QuantizeWeight(const ParamTensor& w, int64_t axis, std::vector<float>* ranges) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= w.dims[d];
  const int64_t channels = w.dims[axis];
  for (size_t d = axis + 1; d < w.dims.size(); ++d) inner *= w.dims[d];
  const float* src = reinterpret_cast<const float*>(w.data->data());
  ranges->assign(channels, 0.0f);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < inner; ++i)
        (*ranges)[c] = std::max((*ranges)[c], std::fabs(src[(o * channels + c) * inner + i]));
  for (float& r : *ranges) {
    if (r == 0.0f) r = 1.0f;
  }
  ParamTensor q;
  q.dtype = DType::kI8;
  q.dims = w.dims;
  q.data = std::make_shared<AlignedBuffer>(NumElements(w.dims));
  auto* dst = q.data->as<int8_t>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < channels; ++c) {
      const float k = kQmax / (*ranges)[c];
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t at = (o * channels + c) * inner + i;
        dst[at] = static_cast<int8_t>(std::clamp(std::nearbyint(src[at] * k), -kQmax, kQmax));
      }
    }
  }
  return q;
}

}  // namespace

QuantPlan PlanQuantization(const Model& model) {
  const pb::ProgramDesc desc = ReadDesc(model);
  const pb::BlockDesc& block = desc.blocks(0);
  // How many ops read each variable.
  std::map<std::string, int> readers;
  for (const auto& op : block.ops()) {
    if (op.type() == "quantize_linear" || op.type() == "dequantize_linear" ||
        op.type().rfind("fake_", 0) == 0)
      Fail(ErrorKind::kInvalidArgument, "{}: the model is quantized already ({} op)",
           model.program.path, op.type());
    std::set<std::string> once;
    for (const auto& v : op.inputs())
      for (const auto& a : v.arguments()) once.insert(a);
    for (const auto& a : once) ++readers[a];
  }
  QuantPlan plan;
  std::set<std::string> seen;
  for (int i = 0; i < block.ops_size(); ++i) {
    const pb::OpDesc& op = block.ops(i);
    const bool conv = op.type() == "conv2d" || op.type() == "depthwise_conv2d";
    if (!conv && op.type() != "matmul_v2") continue;
    const std::string x = Input(op, conv ? "Input" : "X");
    const std::string w = Input(op, conv ? "Filter" : "Y");
    auto skip = [&](const std::string& why) {
      plan.skipped.push_back(fmt::format("{}: {}", Where(op, i), why));
    };
    const VarInfo* xv = model.program.FindVar(x);
    auto p = model.params.find(w);
    if (x.empty() || w.empty() || !xv) {
      skip("unexpected inputs");
    } else if (p == model.params.end()) {
      skip(fmt::format("its weight '{}' is computed, not a parameter", w));
    } else if (p->second.dtype != DType::kF32 || xv->dtype != DType::kF32) {
      skip("not float32");
    } else if (p->second.dims.size() != (conv ? 4u : 2u)) {
      skip(fmt::format("weight '{}' has {} dims", w, p->second.dims.size()));
    } else if (!conv && (BoolAttr(op, "trans_x") || BoolAttr(op, "trans_y"))) {
      skip("transposed operands");
    } else if (readers[w] != 1) {
      skip(fmt::format("weight '{}' is read by {} ops (its int8 form would serve only this one)", w,
                       readers[w]));
    } else {
      plan.targets.push_back({i, op.type(), x, w, conv ? 0 : 1});
      if (seen.insert(x).second) plan.activations.push_back(x);
    }
  }
  return plan;
}

std::string CalibrationProgram(const Model& model, const QuantPlan& plan) {
  pb::ProgramDesc desc = ReadDesc(model);
  pb::BlockDesc* block = desc.mutable_blocks(0);
  int col = 0;
  std::string fetch_var = "fetch";
  for (const auto& op : block->ops()) {
    if (op.type() != "fetch") continue;
    ++col;
    for (const auto& v : op.outputs()) {
      if (v.arguments_size() == 1) fetch_var = v.arguments(0);
    }
  }
  for (const std::string& a : plan.activations) {
    pb::OpDesc* f = block->add_ops();
    f->set_type("fetch");
    AddSlot(f->mutable_inputs(), "X", a);
    AddSlot(f->mutable_outputs(), "Out", fetch_var);
    SetIntAttr(f, "col", col++);
  }
  std::string out;
  TILLER_CHECK(desc.SerializeToString(&out), "{}: calibration program does not serialize",
               model.program.path);
  return out;
}

void WriteQuantizedModel(const Model& model, const QuantPlan& plan,
                         const std::map<std::string, float>& ranges, const std::string& dir) {
  pb::ProgramDesc desc = ReadDesc(model);
  pb::BlockDesc* block = desc.mutable_blocks(0);
  ParamMap params = model.params;
  std::map<int, const QuantTarget*> at;
  for (const QuantTarget& t : plan.targets) at[t.op_index] = &t;
  std::set<std::string> paired;
  google::protobuf::RepeatedPtrField<pb::OpDesc> ops;
  for (int i = 0; i < block->ops_size(); ++i) {
    pb::OpDesc op = block->ops(i);
    auto it = at.find(i);
    if (it != at.end()) {
      const QuantTarget& t = *it->second;
      const std::string& x = t.activation;
      const std::string xq = x + ".quantized", xdq = x + ".quantized.dequantized";
      if (paired.insert(x).second) {
        auto r = ranges.find(x);
        if (r == ranges.end() || !(r->second > 0.0f) || !std::isfinite(r->second))
          Fail(ErrorKind::kInvalidArgument,
               "{}: activation '{}' of {} has no usable calibrated range ({}): every "
               "calibration batch left it zero or not finite",
               model.program.path, x, Where(block->ops(i), i),
               r == ranges.end() ? std::string("none") : fmt::format("{}", r->second));
        const std::vector<int64_t> dims = DimsOf(VarOf(*block, x));
        AddTensorVar(block, x + "@scale", pb::VarType::FP32, {1}, true);
        AddTensorVar(block, xq + "@zero_point", pb::VarType::INT32, {1}, true);
        AddTensorVar(block, xdq + "@zero_point", pb::VarType::INT32, {1}, true);
        AddTensorVar(block, xq, pb::VarType::FP32, dims, false);
        AddTensorVar(block, xdq, pb::VarType::FP32, dims, false);
        params[x + "@scale"] = FloatTensor({r->second});
        params[xq + "@zero_point"] = ZeroPoints(1);
        params[xdq + "@zero_point"] = ZeroPoints(1);
        *ops.Add() = PairOp("quantize_linear", x, x + "@scale", xq + "@zero_point", xq, -1);
        *ops.Add() = PairOp("dequantize_linear", xq, x + "@scale", xdq + "@zero_point", xdq, -1);
      }
      const std::string& w = t.weight;
      const std::string wdq = w + ".quantized.dequantized";
      std::vector<float> w_ranges;
      params[w] = QuantizeWeight(model.params.at(w), t.weight_axis, &w_ranges);
      const auto channels = static_cast<int64_t>(w_ranges.size());
      // The variable keeps its float32 declaration (as Paddle's PTQ leaves
      // it); its record on disk is int8.
      AddTensorVar(block, w + "@scale", pb::VarType::FP32, {channels}, true);
      AddTensorVar(block, wdq + "@zero_point", pb::VarType::INT32, {channels}, true);
      AddTensorVar(block, wdq, pb::VarType::FP32, DimsOf(VarOf(*block, w)), false);
      params[w + "@scale"] = FloatTensor(w_ranges);
      params[wdq + "@zero_point"] = ZeroPoints(channels);
      *ops.Add() =
          PairOp("dequantize_linear", w, w + "@scale", wdq + "@zero_point", wdq, t.weight_axis);
      for (auto& v : *op.mutable_inputs()) {
        for (auto& a : *v.mutable_arguments()) {
          if (a == x) a = xdq;
          if (a == w) a = wdq;
        }
      }
    }
    *ops.Add() = std::move(op);
  }
  block->mutable_ops()->Swap(&ops);
  std::string bytes;
  TILLER_CHECK(desc.SerializeToString(&bytes), "quantized program does not serialize");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) Fail(ErrorKind::kInvalidArgument, "cannot create '{}': {}", dir, ec.message());
  WriteCombinedParams((std::filesystem::path(dir) / "model.pdiparams").string(), params);
  AtomicFile file((std::filesystem::path(dir) / "model.pdmodel").string(), "quantized program");
  file.Write(bytes.data(), bytes.size());
  file.Commit();
}

void WriteCombinedParams(const std::string& path, const ParamMap& params) {
  AtomicFile file(path, "parameters");
  for (const auto& [name, t] : params) {
    const uint32_t version = 0;
    const uint64_t lod_levels = 0;
    file.Write(&version, sizeof(version));
    file.Write(&lod_levels, sizeof(lod_levels));
    file.Write(&version, sizeof(version));  // the tensor's own version
    pb::VarType::TensorDesc desc;
    desc.set_data_type(static_cast<pb::VarType::Type>(VarTypeFromDType(t.dtype)));
    for (int64_t d : t.dims) desc.add_dims(d);
    std::string d;
    TILLER_CHECK(desc.SerializeToString(&d), "{}: TensorDesc of '{}' does not serialize", path,
                 name);
    const auto size = static_cast<int32_t>(d.size());
    file.Write(&size, sizeof(size));
    file.Write(d.data(), d.size());
    if (t.data) file.Write(t.data->data(), NumElements(t.dims) * DTypeSize(t.dtype));
  }
  file.Commit();
}

}  // namespace tiller::paddle
