// Loading custom-op libraries: dlopen, check the ABI version, then register
// per op definition a translator for its Paddle type that builds an IR
// "custom" op (ir/ops/custom.cc) with the output types the library infers.
// The CPU kernel (backends/cpu/kernels/custom.cc) calls the library's compute.
#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>

#include "core/error.h"
#include "frontend/paddle/translate.h"
#include "ir/custom_op_registry.h"
#include "runtime/env_libraries.h"

namespace tiller {
namespace custom_op {
namespace {

std::map<std::string, void*>& Libraries() {
  static std::map<std::string, void*> libs;
  return libs;
}

// Builds the IR "custom" op: inputs in the definition's slot order, output
// types from the library's infer function, stored as attributes so the IR
// schema and the kernel need no access to the library's infer.
void TranslateCustom(const TillerCustomOpDef* def, paddle::TranslateContext& ctx,
                     const paddle::OpDesc& op) {
  std::vector<ir::Value*> ins;
  std::vector<TillerTensorType> in_types;
  for (int i = 0; i < def->num_inputs; ++i) {
    ir::Value* v = ctx.InOpt(op, def->input_slots[i]);
    TillerTensorType t{};
    t.rank = -1;
    if (v) {
      if (!ToAbi(v->dtype(), &t.dtype) || v->rank() > TILLER_CUSTOM_MAX_RANK)
        ctx.Unsupported(op, "custom op input {} = {}: dtype or rank not in the custom-op ABI",
                        def->input_slots[i], v->type.ToString());
      t.rank = v->rank();
      for (int d = 0; d < t.rank; ++d) t.dims[d] = v->shape()[d];
    }
    ins.push_back(v);
    in_types.push_back(t);
  }
  std::vector<TillerTensorType> out_types(def->num_outputs);
  TillerAttrs attrs{&op.attrs};
  char err[512] = {0};
  if (def->infer(in_types.data(), def->num_inputs, &attrs, AttrApi(), out_types.data(), err,
                 sizeof(err)) != 0) {
    err[sizeof(err) - 1] = 0;
    ctx.Invalid(op, "custom op infer failed: {}", err);
  }
  std::vector<int64_t> dtypes, ranks, dims;
  for (const TillerTensorType& t : out_types) {
    DType dt;
    if (!FromAbi(t.dtype, &dt) || t.rank < 0 || t.rank > TILLER_CUSTOM_MAX_RANK)
      ctx.Invalid(op, "custom op infer returned a bad output type (dtype {}, rank {})", t.dtype,
                  t.rank);
    dtypes.push_back(t.dtype);
    ranks.push_back(t.rank);
    for (int d = 0; d < t.rank; ++d) dims.push_back(t.dims[d]);
  }
  ir::AttrMap a = op.attrs;
  a.Set("custom_type", std::string(def->paddle_type));
  a.Set("custom_out_dtypes", dtypes);
  a.Set("custom_out_ranks", ranks);
  a.Set("custom_out_dims", dims);
  ir::Op* o = ctx.AddOp(op, "custom", ins, a);
  for (int i = 0; i < def->num_outputs; ++i) ctx.SetOut(op, def->output_slots[i], o->output(i));
}

void LoadLocked(const std::string& path) {
  if (Libraries().count(path)) return;
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) Fail(ErrorKind::kInvalidArgument, "custom op library {}: {}", path, dlerror());
  auto fn = reinterpret_cast<TillerCustomOpsFn>(dlsym(h, "TillerCustomOps"));
  if (!fn) {
    dlclose(h);
    Fail(ErrorKind::kInvalidArgument, "custom op library {}: no TillerCustomOps symbol", path);
  }
  const TillerCustomOpDef* defs = nullptr;
  int count = 0;
  if (fn(TILLER_CUSTOM_OP_ABI, &defs, &count) != 0 || (count > 0 && !defs)) {
    dlclose(h);
    Fail(ErrorKind::kInvalidArgument,
         "custom op library {}: TillerCustomOps refused ABI version {}", path,
         TILLER_CUSTOM_OP_ABI);
  }
  for (int i = 0; i < count; ++i) {
    const TillerCustomOpDef* d = &defs[i];
    if (!d->paddle_type || !d->infer || !d->compute || d->num_inputs < 0 || d->num_outputs < 1 ||
        (d->num_inputs > 0 && !d->input_slots) || !d->output_slots)
      Fail(ErrorKind::kInvalidArgument, "custom op library {}: definition {} is incomplete", path,
           i);
    if (paddle::FindTranslator(d->paddle_type))
      Fail(ErrorKind::kInvalidArgument,
           "custom op library {}: Paddle op type '{}' already has a translator", path,
           d->paddle_type);
  }
  Libraries()[path] = h;  // kept loaded: translators and kernels point into it
  for (int i = 0; i < count; ++i) {
    const TillerCustomOpDef* d = &defs[i];
    Register(d, path);
    paddle::RegisterTranslator(
        d->paddle_type,
        [d](paddle::TranslateContext& c, const paddle::OpDesc& op) { TranslateCustom(d, c, op); },
        {"custom"});
  }
}

// TILLER_CUSTOM_OPS=lib1.so:lib2.so (env_libraries.h).
const bool kEnvLoaded = runtime::LoadLibrariesFromEnv("TILLER_CUSTOM_OPS", LoadCustomOpLibrary);

}  // namespace

}  // namespace custom_op

void LoadCustomOpLibrary(const std::string& path) {
  std::lock_guard<std::mutex> lock(custom_op::RegistryMutex());
  custom_op::LoadLocked(path);
}

}  // namespace tiller

extern "C" int TillerLoadCustomOpLibrary(const char* path, char* err, size_t err_len) {
  try {
    tiller::LoadCustomOpLibrary(path ? path : "");
    return 0;
  } catch (const std::exception& e) {
    if (err && err_len) {
      std::string m = e.what();
      size_t n = std::min(m.size(), err_len - 1);
      m.copy(err, n);
      err[n] = 0;
    }
    return 1;
  }
}
