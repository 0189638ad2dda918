// LoadModel: finds the program and params files for a path, reads both and
// checks each parameter record against the program's declaration.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "core/error.h"
#include "core/memory_cap.h"
#include "frontend/paddle/program.h"
#include "frontend/paddle/reader_util.h"

namespace tiller::paddle {
namespace {

namespace fs = std::filesystem;

bool IsFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// PIR programs are JSON objects; ProgramDesc bytes never start with '{'
// (field 1, wire type 2 is 0x0a).
bool LooksLikeJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char c = 0;
  while (in.get(c)) {
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return c == '{';
  }
  return false;
}

struct Located {
  std::string program;
  std::string params;  // empty: none found
  bool separate = false;
};

Located Locate(const std::string& model_path, const std::string& params_path) {
  Located loc;
  std::error_code ec;
  if (fs::is_directory(model_path, ec)) {
    fs::path dir(model_path);
    if (IsFile(dir / "__model__")) {
      // Old save_inference_model layout: one file per parameter unless a
      // combined file was named explicitly.
      loc.program = (dir / "__model__").string();
      loc.params = params_path.empty() ? dir.string() : params_path;
      loc.separate = params_path.empty() || fs::is_directory(params_path, ec);
      return loc;
    }
    // Paddle 3 prefers model.json when both formats are present.
    for (const char* name :
         {"model.json", "model.pdmodel", "inference.json", "inference.pdmodel"}) {
      if (IsFile(dir / name)) {
        loc.program = (dir / name).string();
        break;
      }
    }
    if (loc.program.empty()) {
      Fail(ErrorKind::kNotFound,
           "no Paddle model in directory '{}' (looked for __model__, model.json, model.pdmodel, "
           "inference.json, inference.pdmodel)",
           model_path);
    }
  } else {
    loc.program = model_path;
  }
  if (!params_path.empty()) {
    loc.params = params_path;
    loc.separate = fs::is_directory(params_path, ec);
  } else {
    fs::path derived = fs::path(loc.program).replace_extension(".pdiparams");
    if (IsFile(derived)) loc.params = derived.string();
  }
  return loc;
}

// Paddle's post-training quantization stores a quantized weight as int8
// and per-channel scales as [1, C] while the program still declares float32
// [C]: Paddle trusts the file. So does this check, for parameters whose
// every reader is a quantize/dequantize op (which take any scale shape of
// the right size and an int8 input); any other mismatch is a corrupt pair.
bool OnlyQuantizationReads(const Program& prog, const std::string& name) {
  bool read = false;
  for (const OpDesc& op : prog.ops) {
    for (const auto& slot : op.inputs) {
      if (std::find(slot.second.begin(), slot.second.end(), name) == slot.second.end()) continue;
      if (op.type != "dequantize_linear" && op.type != "quantize_linear") return false;
      read = true;
    }
  }
  return read;
}

void CheckParams(const Program& prog, const ParamMap& params, const std::string& params_path) {
  for (const std::string& name : prog.param_names) {
    const VarInfo* var = prog.FindVar(name);
    const ParamTensor& t = params.at(name);
    if (!var || !var->is_dense_tensor) continue;
    bool same = var->dims.size() == t.dims.size();
    for (size_t i = 0; same && i < t.dims.size(); ++i) {
      same = var->dims[i] < 0 || var->dims[i] == t.dims[i];
    }
    if (var->dtype == t.dtype && same) continue;
    if (OnlyQuantizationReads(prog, name) &&
        (var->dtype == t.dtype || (var->dtype == DType::kF32 && t.dtype == DType::kI8)) &&
        NumElements(var->dims) == NumElements(t.dims))
      continue;
    if (var->dtype != t.dtype) {
      Fail(ErrorKind::kDataLoss,
           "parameter '{}': dtype {} in the program ({}) but {} in the params file ({})", name,
           DTypeName(var->dtype), prog.path, DTypeName(t.dtype), params_path);
    }
    Fail(ErrorKind::kDataLoss,
         "parameter '{}': shape {} in the program ({}) but {} in the params file ({})", name,
         ShapeToString(var->dims), prog.path, ShapeToString(t.dims), params_path);
  }
}

}  // namespace

Model LoadModel(const std::string& model_path, const std::string& params_path) {
  Located loc = Locate(model_path, params_path);
  Model model;
  model.program = ReadProgramFile(loc.program);
  const auto& names = model.program.param_names;
  // Paddle writes no params file for a program without parameters.
  std::error_code ec;
  if (names.empty() && (loc.params.empty() || !fs::exists(loc.params, ec))) return model;
  if (loc.params.empty()) {
    Fail(ErrorKind::kNotFound,
         "params for '{}' not found: expected '{}' ({} parameters); pass the params path",
         loc.program, fs::path(loc.program).replace_extension(".pdiparams").string(), names.size());
  }
  model.params = loc.separate ? ReadSeparateParams(loc.params, names, &model.records)
                              : ReadCombinedParams(loc.params, names, &model.records);
  CheckParams(model.program, model.params, loc.params);
  return model;
}

std::shared_ptr<AlignedBuffer> Model::ParamData(const std::string& name) const {
  auto it = params.find(name);
  TILLER_CHECK(it != params.end(), "parameter '{}' was not loaded", name);
  if (it->second.data) return it->second.data;
  TILLER_CHECK(source, "parameter '{}' has no bytes", name);
  return source->Get(name);
}

void Model::MoveParamsToSource() {
  if (records.empty() || source) return;
  source = std::make_shared<ParamSource>(records, params);
  records.clear();
}

Program ReadProgramFile(const std::string& path) {
  if (!IsFile(path)) Fail(ErrorKind::kNotFound, "Paddle model '{}' not found", path);
  // A program of 10^6 ops takes gigabytes to parse before any tensor exists.
  HostMemoryScope budget(path);
  std::string ext = fs::path(path).extension().string();
  if (ext == ".json") return ReadPirProgram(path);
  if (ext == ".pdmodel") return ReadProgramDesc(path);
  return LooksLikeJson(path) ? ReadPirProgram(path) : ReadProgramDesc(path);
}

}  // namespace tiller::paddle
