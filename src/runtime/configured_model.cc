// The model a Config names: files, a directory or buffers in memory.
#include "runtime/configured_model.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

namespace tiller::runtime {

using inference::Config;

namespace {

// TILLER_KEEP_LOADED_WEIGHTS=1 keeps the loaded weights beside the packed
// copies (memory for 2 copies), for a params file that may change while the
// predictor lives and must not be read again.
bool KeepLoadedWeights() {
  const char* v = std::getenv("TILLER_KEEP_LOADED_WEIGHTS");
  return v && *v && std::string(v) != "0";
}

// Config::SetModelBuffer: the readers take files, so the bytes go to a
// private temporary directory for the one read, removed right after; the
// parameters then stay loaded (there is no file to read them from again).
paddle::Model LoadModelBuffer(const Config& config) {
  namespace fs = std::filesystem;
  std::string dir = (fs::temp_directory_path() / "tiller-model-XXXXXX").string();
  if (!mkdtemp(dir.data()))
    Fail(ErrorKind::kNotFound, "Config::SetModelBuffer: cannot create a directory like '{}': {}",
         dir, std::strerror(errno));
  struct RemoveDir {
    std::string dir;
    ~RemoveDir() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } remove{dir};
  auto write = [&](const std::string& name, const std::string& bytes) {
    const std::string path = (fs::path(dir) / name).string();
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) Fail(ErrorKind::kNotFound, "Config::SetModelBuffer: cannot write '{}'", path);
    return path;
  };
  // No extension: the reader tells PIR JSON from a ProgramDesc by content.
  const std::string program = write("model", config.prog_buffer());
  const std::string params =
      config.params_buffer().empty() ? "" : write("model.pdiparams", config.params_buffer());
  try {
    paddle::Model model = paddle::LoadModel(program, params);
    model.program.path = "<model buffer>";
    return model;
  } catch (const Error& e) {
    Fail(e.kind(), "Config::SetModelBuffer: {}", e.what());
  }
}

}  // namespace

paddle::Model LoadConfiguredModel(const Config& config) {
  if (config.model_from_memory()) return LoadModelBuffer(config);
  if (config.model_dir().empty() && config.prog_file().empty())
    Fail(ErrorKind::kInvalidArgument, "Config names no model: set a model file or directory");
  paddle::Model model = config.model_dir().empty()
                            ? paddle::LoadModel(config.prog_file(), config.params_file())
                            : paddle::LoadModel(config.model_dir(), "");
  // Weights that compiled kernels pack are then held once, packed; the file
  // is read again to compile for other input shapes (paddle::ParamSource).
  if (!KeepLoadedWeights()) model.MoveParamsToSource();
  return model;
}

}  // namespace tiller::runtime
