// tiller_gpu_check weights / model: whole models on the GPU against the CPU.
// A GPU machine has no Paddle and the device tool carries 64 MiB, so the
// bundle brings only the programs (exported here) and the weights are made
// there from a seed:
//
//   tiller_gpu_check weights --model bert/model.pdmodel --seed 1
//       writes bert/model.pdiparams: every parameter uniform in
//       +-sqrt(3 / fan_in) (variance 1 / fan_in, so activations stay of
//       order one through deep stacks), 1-D ones (biases, norm scales,
//       batch-norm statistics) in [0.5, 1.5] so that variances are positive.
//   tiller_gpu_check model --model bert/model.pdmodel --shape input_ids=8x128
//       --shape token_type_ids=8x128 --ids input_ids=30522 --ids token_type_ids=2
//       [--devices cuda:0,cpu] [--rel 1e-4] [--runs 5]
//       runs the predictor on the CPU alone and on the devices (first
//       supported: what the CUDA backend lacks stays on the CPU) with the
//       same seeded inputs; every output must agree within rel (of the
//       output's largest value: fp32 GEMMs sum in another order) and the
//       median time of each is printed. Exit 0 when all agree.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "frontend/paddle/program.h"
#include "frontend/paddle/quantize_program.h"
#include "tiller/predictor.h"

namespace tiller::gpu_check {
namespace {

using inference::Config;
using inference::DataType;

std::map<std::string, std::vector<std::string>> Flags(int argc, char** argv) {
  std::map<std::string, std::vector<std::string>> flags;
  for (int i = 0; i + 1 < argc; i += 2) flags[argv[i]].push_back(argv[i + 1]);
  return flags;
}

std::string Flag(std::map<std::string, std::vector<std::string>>& f, const std::string& name,
                 const std::string& fallback) {
  auto it = f.find(name);
  return it == f.end() ? fallback : it->second.back();
}

// name=AxBxC -> {name, {A, B, C}}; name=N -> {name, N}.
std::pair<std::string, std::string> Split(const std::string& arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos) throw std::runtime_error("expected NAME=VALUE, got " + arg);
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}

std::vector<int64_t> Dims(const std::string& text) {
  std::vector<int64_t> dims;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t x = text.find('x', start);
    dims.push_back(std::stoll(text.substr(start, x - start)));
    if (x == std::string::npos) break;
    start = x + 1;
  }
  return dims;
}

}  // namespace

int WeightsMain(int argc, char** argv) {
  auto f = Flags(argc, argv);
  const std::string model = Flag(f, "--model", "");
  const auto seed = static_cast<uint32_t>(std::stoul(Flag(f, "--seed", "1")));
  const paddle::Program program = paddle::ReadProgramFile(model);
  std::string out = Flag(f, "--out", "");
  if (out.empty()) out = model.substr(0, model.rfind('.')) + ".pdiparams";
  std::mt19937 rng(seed);
  paddle::ParamMap params;
  size_t bytes = 0;
  for (const std::string& name : program.param_names) {
    const paddle::VarInfo* v = program.FindVar(name);
    if (!v) throw std::runtime_error("parameter " + name + " has no variable");
    paddle::ParamTensor t;
    t.dtype = v->dtype;
    t.dims = v->dims;
    const int64_t n = NumElements(t.dims);
    t.data = std::make_shared<AlignedBuffer>(static_cast<size_t>(n) * DTypeSize(t.dtype));
    std::memset(t.data->data(), 0, t.data->size());
    if (t.dtype == DType::kF32) {
      const int64_t fan_in = t.dims.size() == 2  ? t.dims[0]
                             : t.dims.size() > 2 ? n / std::max<int64_t>(t.dims[0], 1)
                                                 : 0;
      const float a = fan_in > 0 ? std::sqrt(3.f / static_cast<float>(fan_in)) : 0.f;
      std::uniform_real_distribution<float> u(fan_in > 0 ? -a : 0.5f, fan_in > 0 ? a : 1.5f);
      float* p = t.data->as<float>();
      for (int64_t i = 0; i < n; ++i) p[i] = u(rng);
    }
    bytes += t.data->size();
    params[name] = std::move(t);
  }
  paddle::WriteCombinedParams(out, params);
  fmt::print("weights: {} parameters, {:.1f} MiB, seed {} -> {}\n", params.size(),
             static_cast<double>(bytes) / (1 << 20), seed, out);
  return 0;
}

int ModelMain(int argc, char** argv) {
  auto f = Flags(argc, argv);
  const std::string model = Flag(f, "--model", "");
  const std::string params = Flag(f, "--params", model.substr(0, model.rfind('.')) + ".pdiparams");
  const std::string devices = Flag(f, "--devices", "cuda:0,cpu");
  const double rel = std::stod(Flag(f, "--rel", "1e-4"));
  const int runs = std::stoi(Flag(f, "--runs", "5"));
  const int threads = std::stoi(Flag(f, "--threads", "8"));
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, int64_t> id_bounds;
  for (const std::string& s : f["--shape"]) shapes[Split(s).first] = Dims(Split(s).second);
  for (const std::string& s : f["--ids"]) id_bounds[Split(s).first] = std::stoll(Split(s).second);

  auto make = [&](const std::vector<std::string>& names) {
    Config c(model, params);
    c.SetDevices(names);
    c.SetPlacement(names.size() > 1 ? "first_supported" : "by_shard");
    c.SetCpuMathLibraryNumThreads(threads);
    return inference::CreatePredictor(c);
  };
  std::vector<std::string> device_list;
  for (size_t start = 0; start <= devices.size();) {
    const size_t comma = devices.find(',', start);
    device_list.push_back(devices.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  auto cpu = make({"cpu"});
  auto gpu = make(device_list);

  // Seeded inputs, the same for both.
  std::mt19937 rng(11);
  std::map<std::string, std::vector<char>> inputs;
  for (const std::string& name : cpu->GetInputNames()) {
    if (!shapes.count(name)) throw std::runtime_error("give --shape " + name + "=AxB...");
    const DataType type = cpu->GetInputType(name);
    const int64_t n = NumElements(shapes[name]);
    std::vector<char>& buf = inputs[name];
    if (type == DataType::INT64) {
      buf.resize(static_cast<size_t>(n) * 8);
      const int64_t bound = id_bounds.count(name) ? id_bounds[name] : 2;
      for (int64_t i = 0; i < n; ++i)
        reinterpret_cast<int64_t*>(buf.data())[i] =
            static_cast<int64_t>(rng() % static_cast<uint64_t>(bound));
    } else {
      buf.resize(static_cast<size_t>(n) * 4);
      std::normal_distribution<float> g(0.f, 1.f);
      for (int64_t i = 0; i < n; ++i) reinterpret_cast<float*>(buf.data())[i] = g(rng);
    }
  }
  auto run = [&](inference::Predictor& p, std::map<std::string, std::vector<float>>* outs) {
    for (const auto& [name, buf] : inputs) {
      auto h = p.GetInputHandle(name);
      h->Reshape(shapes[name]);
      h->CopyFromCpuBytes(buf.data(), p.GetInputType(name), buf.size());
    }
    std::vector<double> ms;
    for (int r = 0; r < runs + 1; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      p.Run();
      if (r > 0)
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
    }
    for (const std::string& name : p.GetOutputNames()) {
      auto h = p.GetOutputHandle(name);
      std::vector<float>& v = (*outs)[name];
      v.resize(static_cast<size_t>(NumElements(h->shape())));
      if (h->type() == DataType::FLOAT32) h->CopyToCpu(v.data());
    }
    std::sort(ms.begin(), ms.end());
    return ms.empty() ? 0.0 : ms[ms.size() / 2];
  };
  std::map<std::string, std::vector<float>> want, got;
  const double cpu_ms = run(*cpu, &want);
  const double gpu_ms = run(*gpu, &got);
  bool ok = true;
  for (const auto& [name, w] : want) {
    const std::vector<float>& g = got[name];
    double scale = 0, worst = 0;
    for (float x : w) scale = std::max(scale, std::fabs(static_cast<double>(x)));
    for (size_t i = 0; i < w.size() && i < g.size(); ++i)
      worst = std::max(worst, std::fabs(static_cast<double>(g[i]) - w[i]));
    if (!std::isfinite(worst)) worst = INFINITY;
    const bool good = g.size() == w.size() && worst <= rel * scale;
    ok = ok && good;
    fmt::print("  {:<24} {:>9} values  max |diff| {:.3g} of max |cpu| {:.3g} (rel {:.2g}): {}\n",
               name, w.size(), worst, scale, scale ? worst / scale : worst, good ? "ok" : "FAIL");
  }
  fmt::print("  median run: cpu ({} threads) {:.2f} ms, {} {:.2f} ms\n", threads, cpu_ms, devices,
             gpu_ms);
  fmt::print("model {}: {}\n", model, ok ? "ok" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace tiller::gpu_check
