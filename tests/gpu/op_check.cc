// tiller_gpu_check ops: every CUDA kernel against the CPU backend, on a
// machine with a GPU (scripts/gpu_check.sh runs it there). Each case is a
// one-op graph with seeded random inputs, compiled twice: on [cuda, cpu]
// (first supported: the op on the GPU, its inputs and outputs on the host)
// and on the CPU alone (half inputs widened to the float32 values they hold,
// the result rounded back to the GPU result's type: the CUDA kernels compute
// half types in float32 and round once); the outputs must agree within the
// case's tolerance.
// A CUDA op type with no case here fails too, so a kernel cannot be added
// without being checked.
//
// Tolerances: float32 math done the same way (elementwise, casts,
// transposes) rel 1e-5; transcendental functions and reductions, whose
// float32 roundings differ in order, rel 1e-5 with an absolute floor of
// 1e-6; GEMMs accumulate in float32 in another order (rel 1e-4 of the
// output's largest value, as two BLAS libraries differ; half operands'
// products are exact in float32); half results at one unit of their last
// place (bfloat16 rel 1e-2, float16 2e-3), where a float32 difference in
// the last bit can round the other way.
//
//   tiller_gpu_check ops [--device cuda:0]      exit 0: every case passed
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/kernel.h"
#include "compile/executable.h"
#include "core/half.h"
#include "ir/graph.h"
#include "ir/op_schema.h"
#include "runtime/device_names.h"

namespace {

using namespace tiller;  // NOLINT: a test program

struct Case {
  std::string op;
  std::vector<ir::TensorType> inputs;
  ir::AttrMap attrs;
  double rel = 1e-5, abs = 0;
  // Integer inputs (ids) in [0, id_bound) when > 0.
  int64_t id_bound = 0;
  // Both runs must fail with this in their messages (bad input).
  std::string error = {};
};

// Seeded inputs in [-2, 2] (positive for sqrt), rounded to the input type;
// integers in [0, id_bound) when it is > 0.
void Fill(const ir::TensorType& t, void* p, std::mt19937& rng, bool positive, int64_t id_bound) {
  std::uniform_real_distribution<float> u(positive ? 0.01f : -2.f, 2.f);
  const int64_t n = NumElements(t.shape);
  if (id_bound > 0 && (t.dtype == DType::kI64 || t.dtype == DType::kI32)) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = static_cast<int64_t>(rng() % static_cast<uint64_t>(id_bound));
      if (t.dtype == DType::kI64)
        static_cast<int64_t*>(p)[i] = id;
      else
        static_cast<int32_t*>(p)[i] = static_cast<int32_t>(id);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float v = u(rng);
    switch (t.dtype) {
      case DType::kF32:
        static_cast<float*>(p)[i] = v;
        break;
      case DType::kBF16:
        static_cast<uint16_t*>(p)[i] = FloatToBF16(v);
        break;
      case DType::kF16:
        static_cast<uint16_t*>(p)[i] = FloatToHalf(v);
        break;
      case DType::kI64:
        static_cast<int64_t*>(p)[i] = static_cast<int64_t>(std::lround(v * 10));
        break;
      default:
        std::memset(p, 0, t.bytes());
        return;
    }
  }
}

double ValueAt(const ir::TensorType& t, const void* p, int64_t i) {
  switch (t.dtype) {
    case DType::kF32:
      return static_cast<const float*>(p)[i];
    case DType::kBF16:
      return BF16ToFloat(static_cast<const uint16_t*>(p)[i]);
    case DType::kF16:
      return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
    case DType::kI64:
      return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DType::kBool:
      return static_cast<const bool*>(p)[i] ? 1 : 0;
    default:
      return 0;
  }
}

// The case's inputs, seeded: the same values for both runs.
std::vector<std::vector<char>> MakeInputs(const Case& c) {
  std::mt19937 rng(7);
  std::vector<std::vector<char>> out;
  for (const ir::TensorType& t : c.inputs) {
    out.emplace_back(t.bytes());
    Fill(t, out.back().data(), rng, c.op == "sqrt", c.id_bound);
  }
  return out;
}

// Runs the case's op on `devices` (first supported) and returns its outputs
// as doubles; `on_first` says whether the op was placed on the first
// device. `widen`: half inputs go in as the float32 values they hold (the
// CPU reference: its kernels take few half types, and the CUDA kernels
// compute half types in float32 too), so the result is float32.
std::vector<double> Run(const Case& c, const std::vector<std::vector<char>>& data,
                        const std::vector<compile::DeviceSpec>& devices, bool widen,
                        ir::TensorType* out_type, bool* on_first) {
  auto g = std::make_unique<ir::Graph>();
  std::vector<ir::Value*> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    ir::TensorType t = c.inputs[i];
    if (widen && IsHalf(t.dtype)) t.dtype = DType::kF32;
    ins.push_back(g->AddInput(fmt::format("in{}", i), t));
  }
  ir::Op* op = g->AddOp(c.op, ins, c.attrs, "checked");
  g->AddOutput("out", op->outputs[0]);
  compile::CompileOptions o;
  o.devices = devices;
  o.placement = compile::PlacementPolicy::kFirstSupported;
  o.optimize = false;
  auto exe = compile::Executable::Build(std::move(g), o);
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    void* dst = exe->inputs()[i].data;
    if (widen && IsHalf(c.inputs[i].dtype)) {
      for (int64_t k = 0, n = NumElements(c.inputs[i].shape); k < n; ++k)
        static_cast<float*>(dst)[k] = static_cast<float>(ValueAt(c.inputs[i], data[i].data(), k));
    } else {
      std::memcpy(dst, data[i].data(), data[i].size());
    }
  }
  exe->Run();
  *on_first = false;
  for (const auto& step : exe->graph().ops())
    if (step->name == "checked") *on_first = step->device == 0;
  const compile::TensorSlot& out = exe->outputs()[0];
  *out_type = out.type;
  std::vector<double> values(static_cast<size_t>(NumElements(out.type.shape)));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = ValueAt(out.type, out.data, static_cast<int64_t>(i));
  return values;
}

// A float32 reference value rounded as the GPU's half result was.
double RoundedAs(DType t, double v) {
  if (t == DType::kBF16) return BF16ToFloat(FloatToBF16(static_cast<float>(v)));
  if (t == DType::kF16) return HalfToFloat(FloatToHalf(static_cast<float>(v)));
  return v;
}

std::vector<Case> Cases() {
  using T = ir::TensorType;
  const DType f32 = DType::kF32, bf16 = DType::kBF16, f16 = DType::kF16, i64 = DType::kI64;
  std::vector<Case> cases;
  for (const char* op : {"add", "sub", "mul", "div", "max", "min"}) {
    cases.push_back({op, {T{f32, {4, 3, 33}}, T{f32, {3, 1}}}, {}});
    cases.push_back({op, {T{f32, {1000}}, T{f32, {1000}}}, {}});
    cases.push_back({op, {T{bf16, {8, 64}}, T{bf16, {64}}}, {}, 1e-2});
    cases.push_back({op, {T{f16, {8, 64}}, T{f16, {8, 64}}}, {}, 2e-3});
    if (std::string(op) != "div") cases.push_back({op, {T{i64, {6, 5}}, T{i64, {5}}}, {}, 0});
  }
  for (const char* op : {"relu", "tanh", "exp", "sigmoid", "neg", "sqrt"}) {
    cases.push_back({op, {T{f32, {4097}}}, {}, 1e-5, 1e-6});
    cases.push_back({op, {T{bf16, {300}}}, {}, 1e-2, 1e-3});
    cases.push_back({op, {T{f16, {300}}}, {}, 2e-3, 1e-4});
  }
  const std::pair<DType, DType> casts[] = {{f32, bf16}, {f32, f16},  {bf16, f32},
                                           {f16, f32},  {bf16, f16}, {f16, bf16},
                                           {i64, f32},  {f32, i64},  {f32, DType::kBool}};
  for (auto [from, to] : casts) {
    ir::AttrMap a;
    a.Set("dtype", std::string(DTypeName(to)));
    cases.push_back({"cast", {T{from, {777}}}, a, 0});
  }
  for (DType t : {f32, bf16, i64}) {
    ir::AttrMap a;
    a.Set("perm", std::vector<int64_t>{0, 2, 3, 1});
    cases.push_back({"transpose", {T{t, {2, 3, 5, 7}}}, a, 0});
  }
  {
    // BERT's [CLS] row and a stepped, reversed slice.
    ir::AttrMap first;
    first.Set("axes", std::vector<int64_t>{1});
    first.Set("starts", std::vector<int64_t>{0});
    first.Set("ends", std::vector<int64_t>{1});
    cases.push_back({"slice", {T{f32, {4, 16, 32}}}, first, 0});
    ir::AttrMap stepped;
    stepped.Set("axes", std::vector<int64_t>{0, 2});
    stepped.Set("starts", std::vector<int64_t>{1, -1});
    stepped.Set("ends", std::vector<int64_t>{4, -40});
    stepped.Set("steps", std::vector<int64_t>{2, -3});
    cases.push_back({"slice", {T{i64, {5, 3, 32}}}, stepped, 0});
  }
  for (const char* op : {"softmax", "log_softmax"}) {
    cases.push_back({op, {T{f32, {16, 129}}}, {}, 1e-5, 1e-6});
    cases.push_back({op, {T{f32, {3, 4, 1000}}}, {}, 1e-5, 1e-6});
  }
  for (bool approximate : {false, true}) {
    ir::AttrMap a;
    a.Set("approximate", approximate);
    cases.push_back({"gelu", {T{f32, {4097}}}, a, 1e-5, 1e-6});
    cases.push_back({"gelu", {T{bf16, {300}}}, a, 1e-2, 1e-3});
  }
  {
    ir::AttrMap a;
    a.Set("epsilon", 1e-12);
    cases.push_back(
        {"layer_norm", {T{f32, {6, 768}}, T{f32, {768}}, T{f32, {768}}}, a, 1e-5, 1e-5});
    cases.push_back({"layer_norm", {T{f32, {3, 5, 33}}}, {}, 1e-5, 1e-5});
    ir::AttrMap two;
    two.Set("axis", int64_t{1});
    cases.push_back({"layer_norm", {T{f32, {4, 6, 10}}}, two, 1e-5, 1e-5});
  }
  {
    ir::AttrMap pad;
    pad.Set("padding_idx", int64_t{3});
    Case e{"embedding", {T{f32, {50, 64}}, T{i64, {4, 16}}}, pad, 0};
    e.id_bound = 50;
    cases.push_back(e);
    e.inputs = {T{bf16, {50, 64}}, T{DType::kI32, {40}}};
    e.attrs = {};
    cases.push_back(e);
    // An id outside the table: both backends refuse the run naming it.
    e.inputs = {T{f32, {10, 8}}, T{i64, {64}}};
    e.id_bound = 15;
    e.error = "outside [0, 10)";
    cases.push_back(e);
  }
  for (bool after : {true, false}) {
    ir::AttrMap a;
    a.Set("scale", 0.125);
    a.Set("bias", -1.5);
    a.Set("bias_after_scale", after);
    cases.push_back({"scale", {T{f32, {999}}}, a});
    cases.push_back({"scale", {T{bf16, {999}}}, a, 1e-2, 1e-3});
  }
  cases.push_back({"equal", {T{i64, {4, 16}}, T{i64, {1}}}, {}, 0});
  cases.push_back({"equal", {T{f32, {4, 16}}, T{f32, {4, 16}}}, {}, 0});
  {
    // BERT's fused attention: heads side by side, with and without a mask,
    // and reading q, k and v at column offsets of one packed tensor each.
    ir::AttrMap a;
    a.Set("heads", int64_t{4});
    a.Set("alpha", 0.25);
    cases.push_back({"attention",
                     {T{f32, {2, 16, 64}}, T{f32, {2, 24, 64}}, T{f32, {2, 24, 64}}},
                     a,
                     1e-5,
                     1e-6});
    cases.push_back(
        {"attention",
         {T{f32, {2, 16, 64}}, T{f32, {2, 16, 64}}, T{f32, {2, 16, 64}}, T{f32, {2, 1, 1, 16}}},
         a,
         1e-5,
         1e-6});
    ir::AttrMap packed = a;
    packed.Set("head_dim", int64_t{16});
    packed.Set("offsets", std::vector<int64_t>{0, 64, 128});
    cases.push_back(
        {"attention",
         {T{f32, {2, 16, 192}}, T{f32, {2, 16, 192}}, T{f32, {2, 16, 192}}, T{f32, {2, 4, 16, 16}}},
         packed,
         1e-5,
         1e-6});
  }
  auto lin = [&](DType t, bool bias, bool residual, const char* act, const char* out_dtype,
                 double rel) {
    ir::AttrMap a;
    a.Set("activation", std::string(act));
    if (*out_dtype) a.Set("out_dtype", std::string(out_dtype));
    const DType out = *out_dtype ? DType::kF32 : t;
    std::vector<T> ins = {T{t, {2, 24, 96}}, T{t, {96, 80}}};
    if (bias || residual) ins.push_back(T{out == DType::kF32 ? f32 : t, {80}});
    if (residual) ins.push_back(T{out, {2, 24, 80}});
    cases.push_back({"linear", ins, a, rel, rel});
  };
  lin(f32, false, false, "", "", 1e-4);
  lin(f32, true, false, "gelu", "", 1e-4);
  lin(f32, true, true, "", "", 1e-4);
  lin(f32, true, true, "relu", "", 1e-4);
  lin(f32, true, false, "tanh", "", 1e-4);
  lin(bf16, true, false, "gelu_tanh", "float32", 1e-4);
  lin(bf16, true, true, "", "float32", 1e-4);
  auto mm = [&](Shape x, Shape y, DType t, bool ta, bool tb, const char* out_dtype, double rel) {
    ir::AttrMap a;
    a.Set("transpose_a", ta);
    a.Set("transpose_b", tb);
    if (*out_dtype) a.Set("out_dtype", std::string(out_dtype));
    cases.push_back({"matmul", {T{t, x}, T{t, y}}, a, rel, rel});
  };
  mm({64, 96}, {96, 80}, f32, false, false, "", 1e-4);
  mm({96, 64}, {96, 80}, f32, true, false, "", 1e-4);
  mm({64, 96}, {80, 96}, f32, false, true, "", 1e-4);
  mm({3, 32, 48}, {3, 48, 40}, f32, false, false, "", 1e-4);
  mm({3, 32, 48}, {48, 40}, f32, false, false, "", 1e-4);
  mm({128, 768}, {768, 768}, bf16, false, false, "float32", 1e-4);
  mm({64, 96}, {96, 80}, f16, false, false, "float32", 1e-4);
  mm({2, 64, 96}, {2, 96, 80}, bf16, false, false, "", 1e-2);
  return cases;
}

}  // namespace

namespace tiller::gpu_check {

int OpsMain(int argc, char** argv) {
  std::string device = "cuda:0";
  for (int i = 0; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--device") device = argv[i + 1];
  try {
    const compile::DeviceSpec gpu = runtime::DeviceSpecOf(device, 1, false);
    const compile::DeviceSpec cpu = runtime::DeviceSpecOf("cpu", 1, false);
    {
      // The GPU first: without one every case would fail alike.
      auto probe = backend::FindBackend(gpu.backend)->CreateDevice(0, {.unit = gpu.unit});
      fmt::print("device {}: {} bytes free\n", device, probe->capacity_bytes());
    }
    std::set<std::string> covered;
    int failed = 0, passed = 0;
    fmt::print("{:<12} {:<38} {:<9} {:>10} {:>10}  {}\n", "op", "inputs", "out", "max err",
               "allowed", "result");
    for (const Case& c : Cases()) {
      covered.insert(c.op);
      std::string inputs;  // NOLINT
      for (const auto& t : c.inputs) inputs += (inputs.empty() ? "" : ",") + t.ToString();
      ir::TensorType out_type, ref_type;
      bool on_gpu = false, unused = false;
      std::vector<double> want, got;
      std::string error;
      std::string cpu_error;
      const auto data = MakeInputs(c);
      try {
        want = Run(c, data, {cpu}, true, &ref_type, &unused);
      } catch (const std::exception& e) {
        cpu_error = e.what();
      }
      try {
        got = Run(c, data, {gpu, cpu}, false, &out_type, &on_gpu);
      } catch (const std::exception& e) {
        error = e.what();
      }
      if (!c.error.empty()) {
        // Bad input: both must refuse it, saying so.
        const bool ok = cpu_error.find(c.error) != std::string::npos &&
                        error.find(c.error) != std::string::npos;
        fmt::print("{:<12} {:<38} {:<9} {:>10} {:>10}  {}\n", c.op, inputs, "(error)", "", "",
                   ok ? "ok: both refused (" + c.error + ")"
                      : "FAIL: cpu said '" + cpu_error + "', gpu said '" + error + "'");
        (ok ? passed : failed)++;
        continue;
      }
      if (!cpu_error.empty()) error = "cpu reference: " + cpu_error;
      double worst = 0, allowed = 0;
      bool ok = error.empty() && on_gpu && want.size() == got.size();
      if (ok) {
        double scale = 0;
        for (double w : want) scale = std::max(scale, std::abs(w));
        for (size_t i = 0; i < want.size(); ++i) {
          const double w = RoundedAs(out_type.dtype, want[i]), v = got[i];
          // GEMMs: relative to the output's scale (their sums cancel).
          const bool gemm = c.op == "matmul" || c.op == "linear";
          const double lim = c.rel * (gemm ? scale : std::abs(w)) + c.abs;
          if (!(std::abs(v - w) <= lim)) ok = false;
          worst = std::max(worst, std::abs(v - w));
          allowed = std::max(allowed, lim);
        }
      }
      fmt::print("{:<12} {:<38} {:<9} {:>10.3g} {:>10.3g}  {}\n", c.op, inputs,
                 DTypeName(out_type.dtype), worst, allowed,
                 ok               ? "ok"
                 : !error.empty() ? "ERROR " + error
                 : !on_gpu        ? "NOT ON GPU"
                                  : "FAIL");
      (ok ? passed : failed)++;
    }
    for (const std::string& type : ir::AllOpSchemaNames()) {
      if (backend::HasKernel("cuda", type) && !covered.count(type)) {
        fmt::print("{:<12} has a CUDA kernel and no case here: FAIL\n", type);
        ++failed;
      }
    }
    fmt::print("ops: {} passed, {} failed\n", passed, failed);
    return failed ? 1 : 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "tiller_gpu_check: {}\n", e.what());
    return 2;
  }
}

}  // namespace tiller::gpu_check
