// include/tiller/quantize.h: calibration on Tiller's own predictor, the
// program rewrite in frontend/paddle/quantize_program.cc.
#include "tiller/quantize.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/error.h"
#include "frontend/paddle/quantize_program.h"
#include "tiller/predictor.h"

namespace tiller::quantize {
namespace {

// Removes the calibration files however QuantizeModel ends.
struct TempDir {
  std::filesystem::path path;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

float AbsMax(const std::vector<float>& v, const std::string& name) {
  float m = 0.0f;
  for (float x : v) {
    if (!std::isfinite(x))
      Fail(ErrorKind::kInvalidArgument,
           "calibration: activation '{}' holds a non-finite value ({}): the model or the "
           "calibration inputs produce NaN/Inf",
           name, x);
    m = std::max(m, std::fabs(x));
  }
  return m;
}

}  // namespace

Result QuantizeModel(const std::string& model_path, const std::string& params_path,
                     const std::vector<Batch>& batches, const std::string& out_dir,
                     const Options& options) {
  if (options.algo != "abs_max" && options.algo != "avg")
    Fail(ErrorKind::kInvalidArgument, "quantize: algo '{}' is not abs_max or avg", options.algo);
  if (batches.empty())
    Fail(ErrorKind::kInvalidArgument, "quantize: no calibration batches were given");
  paddle::Model model = paddle::LoadModel(model_path, params_path);
  const paddle::QuantPlan plan = paddle::PlanQuantization(model);
  Result result;
  result.skipped = plan.skipped;
  if (plan.targets.empty())
    Fail(ErrorKind::kInvalidArgument,
         "{}: nothing to quantize (no conv2d or matmul_v2 on a "
         "float32 weight parameter){}",
         model.program.path, plan.skipped.empty() ? "" : ": " + plan.skipped.front());
  const std::vector<std::string>& feeds = model.program.feed_names;
  for (size_t b = 0; b < batches.size(); ++b) {
    for (const std::string& f : feeds) {
      if (!batches[b].count(f))
        Fail(ErrorKind::kNotFound,
             "calibration batch {} has no input '{}' (the model's inputs: {})", b, f,
             fmt::join(feeds, ", "));
    }
    for (const auto& [name, t] : batches[b]) {
      if (std::find(feeds.begin(), feeds.end(), name) == feeds.end())
        Fail(ErrorKind::kNotFound, "calibration batch {}: '{}' is not an input of the model ({})",
             b, name, fmt::join(feeds, ", "));
    }
  }

  // The model with its activations fetched, in a scratch directory.
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec)
    Fail(ErrorKind::kInvalidArgument, "quantize: cannot create '{}': {}", out_dir, ec.message());
  TempDir tmp{std::filesystem::path(out_dir) / ".calibration"};
  std::filesystem::create_directories(tmp.path, ec);
  if (ec)
    Fail(ErrorKind::kInvalidArgument, "quantize: cannot create '{}': {}", tmp.path.string(),
         ec.message());
  const std::string calib_model = (tmp.path / "model.pdmodel").string();
  const std::string calib_params = (tmp.path / "model.pdiparams").string();
  {
    const std::string bytes = paddle::CalibrationProgram(model, plan);
    AtomicFile f(calib_model, "calibration program");
    f.Write(bytes.data(), bytes.size());
    f.Commit();
  }
  paddle::WriteCombinedParams(calib_params, model.params);

  inference::Config config(calib_model, calib_params);
  config.SetCpuMathLibraryNumThreads(options.threads);
  inference::Predictor predictor(config);
  std::map<std::string, std::vector<float>> per_batch;
  for (size_t b = 0; b < batches.size(); ++b) {
    for (const auto& [name, t] : batches[b]) {
      auto in = predictor.GetInputHandle(name);
      in->Reshape(t.shape);
      in->CopyFromCpuBytes(t.data.data(), t.dtype, t.data.size());
    }
    predictor.Run();
    for (const std::string& a : plan.activations) {
      auto out = predictor.GetOutputHandle(a);
      int64_t n = 1;
      for (int64_t d : out->shape()) n *= d;
      std::vector<float> v(n);
      out->CopyToCpu(v.data());
      per_batch[a].push_back(AbsMax(v, a));
    }
    if (options.progress) options.progress(b + 1, batches.size());
  }
  for (const auto& [a, maxes] : per_batch) {
    float r = 0.0f;
    if (options.algo == "abs_max") {
      r = *std::max_element(maxes.begin(), maxes.end());
    } else {
      double sum = 0.0;
      for (float m : maxes) sum += m;
      r = static_cast<float>(sum / static_cast<double>(maxes.size()));
    }
    result.ranges[a] = r;
  }
  paddle::WriteQuantizedModel(model, plan, result.ranges, out_dir);
  for (const auto& t : plan.targets) ++result.quantized[t.op_type];
  result.model_file = (std::filesystem::path(out_dir) / "model.pdmodel").string();
  result.params_file = (std::filesystem::path(out_dir) / "model.pdiparams").string();
  return result;
}

}  // namespace tiller::quantize
