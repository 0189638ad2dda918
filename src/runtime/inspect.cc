// include/tiller/inspect.h: model facts and the supported-op table.
#include "tiller/inspect.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>

#include "backend/backend.h"
#include "backend/kernel.h"
#include "compile/compile_pipeline.h"
#include "frontend/paddle/op_table.h"
#include "frontend/paddle/program.h"
#include "frontend/paddle/translate.h"
#include "ir/op_schema.h"
#include "passes/pass.h"
#include "runtime/api_types.h"
#include "runtime/device_names.h"

namespace tiller {
namespace {

// The dtypes a Paddle op's translation runs with: those every IR op it can
// emit has a CPU kernel for (backend/kernel.h says which tensor each
// declaration constrains). IR ops without a kernel (reshape, a view)
// constrain nothing, so pass-through and view-only translations give "all".
// A dtype-dependent lowering (integer matmul as mul + reduce_sum) is
// understated, not overstated: the intersection takes the float path's
// kernels too.
std::string TranslationDTypes(const paddle::OpTableRow& r) {
  if (!r.ir_ops_declared) return "-";
  std::vector<DType> dtypes = AllDTypes();
  bool any_kernel = false;
  for (const std::string& ir : r.ir_ops) {
    const std::vector<DType>* k = backend::KernelDTypes("cpu", ir);
    if (!k) continue;
    any_kernel = true;
    std::erase_if(dtypes, [&](DType t) { return std::find(k->begin(), k->end(), t) == k->end(); });
  }
  if (!any_kernel || dtypes.size() == AllDTypes().size()) return "all";
  if (dtypes.empty()) return "none";
  std::string out;
  for (DType t : dtypes) out += (out.empty() ? "" : ",") + std::string(DTypeName(t));
  return out;
}

// OpSupport::half, from the IR ops the translation emits and its dtypes.
std::string HalfPrecision(const paddle::OpTableRow& r, const std::string& dtypes) {
  if (!r.ir_ops_declared) return "-";
  for (const std::string& ir : r.ir_ops) {
    if (passes::MultipliesInHalf(ir)) return "bfloat16 GEMM, float16 rounded";
  }
  auto has = [&](DType t) {
    return dtypes == "all" ||
           (',' + dtypes + ',').find(',' + std::string(DTypeName(t)) + ',') != std::string::npos;
  };
  if (has(DType::kBF16) && has(DType::kF16)) return "bfloat16, float16";
  if (has(DType::kF32)) return "via float32";
  return "-";
}

}  // namespace

ModelInfo InspectModel(const std::string& model_path, const std::string& params_path) {
  paddle::Model loaded = paddle::LoadModel(model_path, params_path);
  const paddle::Program& prog = loaded.program;
  ModelInfo m;
  m.path = prog.path;
  m.format = prog.format;
  for (const std::string& n : prog.feed_names) {
    const paddle::VarInfo* v = prog.FindVar(n);
    if (!v) Fail(ErrorKind::kDataLoss, "{}: feed target '{}' has no variable", prog.path, n);
    m.inputs.push_back({n, ToApi(v->dtype), v->dims});
  }
  m.outputs = prog.fetch_names;
  m.num_ops = prog.ops.size();
  for (const auto& op : prog.ops) ++m.op_histogram[op.type];
  for (const auto& [type, count] : paddle::UnsupportedOps(prog)) m.unsupported_ops.push_back(type);
  m.num_params = loaded.params.size();
  for (const auto& [name, t] : loaded.params) m.param_bytes += t.data ? t.data->size() : 0;
  return m;
}

std::vector<ProgramOp> ReadProgramOps(const std::string& program_path) {
  paddle::Program prog = paddle::ReadProgramFile(program_path);
  std::vector<ProgramOp> ops;
  for (const paddle::OpDesc& op : prog.ops) {
    ProgramOp p;
    p.type = op.type;
    p.inputs.assign(op.inputs.begin(), op.inputs.end());
    p.outputs.assign(op.outputs.begin(), op.outputs.end());
    p.translatable = paddle::FindTranslator(op.type) != nullptr;
    ops.push_back(std::move(p));
  }
  return ops;
}

std::vector<OpSupport> SupportedOps() {
  std::vector<OpSupport> out;
  for (const paddle::OpTableRow& r : paddle::PaddleOpTable()) {
    OpSupport s;
    s.paddle_op = r.paddle_op;
    s.pir_names = r.pir_names;
    s.ir_ops = r.ir_ops;
    s.ir_ops_declared = r.ir_ops_declared;
    s.dtypes = TranslationDTypes(r);
    s.half = HalfPrecision(r, s.dtypes);
    s.notes = r.notes;
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<BackendKernel> BackendKernels(const std::string& name) {
  runtime::EnsureBackend(name);
  if (!backend::FindBackend(name))
    Fail(ErrorKind::kInvalidArgument, "no backend '{}' (registered: {})", name,
         fmt::join(backend::BackendNames(), ", "));
  std::vector<BackendKernel> out;
  for (const std::string& type : ir::AllOpSchemaNames()) {
    const std::vector<const backend::Signature*> sigs = backend::KernelSignatures(name, type);
    if (sigs.empty()) continue;
    BackendKernel k{type, {}};
    for (const backend::Signature* sig : sigs) k.signatures.push_back(sig->Describe());
    out.push_back(std::move(k));
  }
  std::sort(out.begin(), out.end(),
            [](const BackendKernel& a, const BackendKernel& b) { return a.ir_op < b.ir_op; });
  return out;
}

std::vector<std::string> SupportedPaddleOps() {
  return paddle::SupportedPaddleOps();
}

std::string DescribeCompilePipeline(const std::vector<std::string>& device_backends) {
  std::vector<std::unique_ptr<backend::Device>> owned;
  std::vector<backend::Device*> devices;
  compile::CompileOptions options;
  options.devices.clear();
  for (const std::string& name : device_backends) {
    const compile::DeviceSpec spec = runtime::DeviceSpecOf(name, 1, false);
    const backend::Backend* b = backend::FindBackend(spec.backend);
    if (!b)
      Fail(ErrorKind::kInvalidArgument, "no backend '{}' (registered: {})", spec.backend,
           fmt::join(backend::BackendNames(), ", "));
    owned.push_back(b->CreateDevice(static_cast<int>(owned.size()), {.unit = spec.unit}));
    devices.push_back(owned.back().get());
    options.devices.push_back(spec);
  }
  if (devices.empty()) Fail(ErrorKind::kInvalidArgument, "describing a compile of no devices");
  compile::CompiledStep step;
  auto rewrites = compile::RewritePipeline(options, devices, &step);
  auto placement = compile::PlacementPipeline(options, devices, 0, &step);
  return fmt::format("{} ({}):\n{}{} ({}):\n{}", rewrites->name(), rewrites->summary(),
                     rewrites->Document(2), placement->name(), placement->summary(),
                     placement->Document(2));
}

}  // namespace tiller
