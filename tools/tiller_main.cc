// The `tiller` command: inspect, run and benchmark exported Paddle models.
//   tiller info MODEL [--params P] [--shape name=1x128]...
//   tiller run MODEL --input name=file.npy... --output-dir DIR [--trace FILE]
//   tiller bench MODEL --batch N --seq-len L --threads T [--trace FILE]
//   tiller quantize MODEL --calibrate DIR --output-dir OUT [--algo abs_max|avg]
//   tiller ops
//   tiller plan MODEL [--train] --devices N --replicas R --micro-batch B --accumulate G
//               [--profile ipu-mk2]
#include <fmt/format.h>
#include <immintrin.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <new>
#include <random>
#include <set>
#include <sstream>

#include "npy.h"
#include "tiller/backends.h"
#include "tiller/inspect.h"
#include "tiller/planner.h"
#include "tiller/predictor.h"
#include "tiller/quantize.h"

namespace {

using tiller::ErrorKind;
using tiller::inference::Config;
using tiller::inference::DataType;
using tiller::inference::Predictor;

template <typename... Args>
[[noreturn]] void Fail(ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
  throw tiller::Error(kind, fmt::format(format, std::forward<Args>(args)...));
}

// Devices and placement of the subcommands that compile.
struct DeviceArgs {
  std::string devices = "cpu";  // comma-separated backends, preference order
  std::string placement = "by_shard";
  std::vector<std::string> libraries;
  std::string trace;                  // --trace FILE
  std::string precision = "float32";  // --precision
  bool no_winograd = false;           // --no-winograd
};

Config MakeConfig(const std::string& model, const std::string& params, int threads,
                  const DeviceArgs& dev = {}) {
  Config c;
  if (std::filesystem::is_directory(model))
    c.SetModelDir(model);
  else
    c.SetModel(model, params);
  c.SetCpuMathLibraryNumThreads(threads);
  for (const std::string& lib : dev.libraries) tiller::LoadBackendLibrary(lib);
  std::vector<std::string> names;
  std::stringstream ss(dev.devices);
  for (std::string b; std::getline(ss, b, ',');) {
    if (!b.empty()) names.push_back(b);
  }
  c.SetDevices(names);
  c.SetPlacement(dev.placement);
  c.EnableTrace(dev.trace);
  c.SetPrecision(dev.precision);
  c.SwitchWinograd(!dev.no_winograd);
  return c;
}

// "input_ids=1x128" -> (name, dims)
std::pair<std::string, std::vector<int64_t>> ParseShapeArg(const std::string& arg) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos)
    Fail(ErrorKind::kInvalidArgument, "--shape '{}' is not NAME=DxDx...", arg);
  std::vector<int64_t> dims;
  std::string rest = arg.substr(eq + 1);
  size_t pos = 0;
  while (pos <= rest.size()) {
    size_t x = rest.find('x', pos);
    std::string tok = rest.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    try {
      dims.push_back(std::stoll(tok));
    } catch (const std::exception&) {
      Fail(ErrorKind::kInvalidArgument, "--shape '{}': '{}' is not a number", arg, tok);
    }
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  return {arg.substr(0, eq), dims};
}

// Shape for an input: explicit --shape, else declared dims with dynamic dims
// taken from --batch (first) and --seq-len (second).
std::vector<int64_t> ChooseShape(Predictor& p, const std::string& name,
                                 const std::map<std::string, std::vector<int64_t>>& shapes,
                                 int64_t batch, int64_t seq_len) {
  auto it = shapes.find(name);
  if (it != shapes.end()) return it->second;
  std::vector<int64_t> dims = p.GetInputShape(name);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] >= 0) continue;
    if (i == 0)
      dims[i] = batch;
    else if (i == 1)
      dims[i] = seq_len;
    else
      Fail(ErrorKind::kInvalidArgument,
           "input '{}' has dynamic dim {}: give it with --shape {}=...", name, i, name);
  }
  return dims;
}

// Synthetic feeds: integers alternate 0/1 (valid ids and type ids for any
// vocabulary), floats are uniform in [-1, 1).
void FillSynthetic(Predictor& p, const std::map<std::string, std::vector<int64_t>>& shapes,
                   int64_t batch, int64_t seq_len) {
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (const auto& name : p.GetInputNames()) {
    auto h = p.GetInputHandle(name);
    auto dims = ChooseShape(p, name, shapes, batch, seq_len);
    h->Reshape(dims);
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    switch (p.GetInputType(name)) {
      case DataType::FLOAT32: {
        std::vector<float> v(n);
        for (auto& x : v) x = uni(rng);
        h->CopyFromCpu(v.data());
        break;
      }
      case DataType::INT64: {
        std::vector<int64_t> v(n);
        for (int64_t i = 0; i < n; ++i) v[i] = i % 2;
        h->CopyFromCpu(v.data());
        break;
      }
      case DataType::INT32: {
        std::vector<int32_t> v(n);
        for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(i % 2);
        h->CopyFromCpu(v.data());
        break;
      }
      case DataType::BFLOAT16:
      case DataType::FLOAT16: {
        // Half inputs (a model saved in bfloat16 / float16): the same
        // uniform values, rounded to nearest even into the half type.
        const bool bf16 = p.GetInputType(name) == DataType::BFLOAT16;
        std::vector<uint16_t> v(n);
        for (auto& x : v) {
          const float f = uni(rng);
          uint32_t bits;
          std::memcpy(&bits, &f, 4);
          x = bf16 ? static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16)
                   : static_cast<uint16_t>(_cvtss_sh(f, 0));
        }
        h->CopyFromCpuBytes(v.data(), p.GetInputType(name), v.size() * sizeof(uint16_t));
        break;
      }
      default:
        Fail(ErrorKind::kUnimplemented, "bench: cannot synthesize input '{}' of type {}", name,
             tiller::inference::DataTypeName(p.GetInputType(name)));
    }
  }
}

std::string Dims(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

std::string Mib(size_t bytes) {
  return fmt::format("{:.2f} MiB", bytes / 1048576.0);
}

int Info(const std::string& model, const std::string& params,
         const std::vector<std::string>& shape_args, const DeviceArgs& dev, bool passes) {
  // Describe the program before compiling, so a model with unsupported ops
  // still gets its op histogram.
  tiller::ModelInfo m = tiller::InspectModel(model, params);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& a : shape_args) shapes.insert(ParseShapeArg(a));
  fmt::print("model: {} ({} format)\ninputs:\n", m.path, m.format);
  for (const auto& in : m.inputs)
    fmt::print("  {:<24} {:<8} {}\n", in.name, tiller::DataTypeName(in.dtype), Dims(in.dims));
  fmt::print("outputs:\n");
  for (const auto& n : m.outputs) fmt::print("  {}\n", n);
  fmt::print("ops: {} in {} types\n", m.num_ops, m.op_histogram.size());
  std::vector<std::pair<std::string, int>> sorted(m.op_histogram.begin(), m.op_histogram.end());
  std::sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.second > b.second; });
  std::set<std::string> unsupported(m.unsupported_ops.begin(), m.unsupported_ops.end());
  for (const auto& [t, c] : sorted) {
    bool ok = !unsupported.count(t);
    fmt::print("  {:<32} {:>5}{}\n", t, c, ok ? "" : "   (unsupported)");
  }
  fmt::print("parameters: {} tensors, {}\n", m.num_params, Mib(m.param_bytes));
  std::fflush(stdout);
  auto p = tiller::inference::CreatePredictor(MakeConfig(model, params, 1, dev));
  FillSynthetic(*p, shapes, 1, 128);
  p->Run();
  auto s = p->GetSummary();
  fmt::print("compiled for:");
  for (const auto& n : p->GetInputNames())
    fmt::print(" {}={}", n, Dims(p->GetInputHandle(n)->shape()));
  fmt::print("\n  kernels: {}\n  planned activation memory: {} (one buffer per tensor: {})\n",
             s.num_kernels, Mib(s.arena_bytes), Mib(s.naive_bytes));
  if (passes)
    fmt::print("compile stages (rewrites, ops before -> after, op types added/removed):\n{}",
               s.compile_report);
  return 0;
}

int Run(const std::string& model, const std::string& params, const std::vector<std::string>& inputs,
        const std::string& out_dir, int threads, const DeviceArgs& dev) {
  auto p = tiller::inference::CreatePredictor(MakeConfig(model, params, threads, dev));
  std::set<std::string> given;
  for (const auto& arg : inputs) {
    size_t eq = arg.find('=');
    if (eq == std::string::npos)
      Fail(ErrorKind::kInvalidArgument, "--input '{}' is not NAME=FILE.npy", arg);
    std::string name = arg.substr(0, eq);
    auto arr = tiller::tools::ReadNpy(arg.substr(eq + 1));
    auto h = p->GetInputHandle(name);
    h->Reshape(arr.shape);
    DataType dt = p->GetInputType(name);
    if (arr.dtype != dt)
      Fail(ErrorKind::kInvalidArgument, "input '{}' expects {}, {} holds {}", name,
           tiller::DataTypeName(dt), arg.substr(eq + 1), tiller::DataTypeName(arr.dtype));
    h->CopyFromCpuBytes(arr.data.data(), dt, arr.data.size());
    given.insert(name);
  }
  for (const auto& n : p->GetInputNames()) {
    if (!given.count(n)) Fail(ErrorKind::kInvalidArgument, "missing --input {}=FILE.npy", n);
  }
  p->Run();
  std::filesystem::create_directories(out_dir);
  for (const auto& n : p->GetOutputNames()) {
    auto h = p->GetOutputHandle(n);
    std::vector<std::byte> buf(h->numel() * tiller::inference::SizeOf(h->type()));
    h->CopyToCpuBytes(buf.data(), buf.size());
    std::string file = n;
    std::replace(file.begin(), file.end(), '/', '_');
    std::string path = (std::filesystem::path(out_dir) / (file + ".npy")).string();
    tiller::tools::WriteNpy(path, h->type(), h->shape(), buf.data());
    fmt::print("{} {} -> {}\n", n, Dims(h->shape()), path);
  }
  return 0;
}

int Bench(const std::string& model, const std::string& params, int64_t batch, int64_t seq_len,
          int threads, int warmup, int iters, const std::vector<std::string>& shape_args,
          bool profile, const DeviceArgs& dev) {
  auto p = tiller::inference::CreatePredictor(MakeConfig(model, params, threads, dev));
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& a : shape_args) shapes.insert(ParseShapeArg(a));
  FillSynthetic(*p, shapes, batch, seq_len);
  auto t0 = std::chrono::steady_clock::now();
  p->Run();
  double compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("compile + first run: {:.1f} ms\n", compile_ms);
  for (int i = 0; i < warmup; ++i) p->Run();
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    auto s = std::chrono::steady_clock::now();
    p->Run();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
    if (iters >= 20 && (i + 1) % (iters / 4) == 0)
      fmt::print(stderr, "  {}/{} runs\n", i + 1, iters);
  }
  std::sort(ms.begin(), ms.end());
  double median = ms[ms.size() / 2];
  fmt::print("threads {}  batch {}  seq_len {}\n", threads, batch, seq_len);
  fmt::print("latency: median {:.3f} ms  min {:.3f} ms  max {:.3f} ms  ({} runs)\n", median,
             ms.front(), ms.back(), iters);
  fmt::print("throughput: {:.1f} samples/s\n", batch * 1000.0 / median);
  if (profile) {
    p->EnableProfiling(true);
    for (int i = 0; i < iters; ++i) p->Run();
    fmt::print("profile ({} runs, per run):\n  {:<24} {:>10} {:>7} {:>6}\n", iters, "op", "ms", "%",
               "calls");
    double total = 0;
    for (const auto& [type, ms, calls] : p->GetProfile()) total += ms;
    for (const auto& [type, ms, calls] : p->GetProfile())
      fmt::print("  {:<24} {:>10.3f} {:>6.1f}% {:>6}\n", type, ms / iters, 100.0 * ms / total,
                 calls / iters);
  }
  return 0;
}

int Ops() {
  // One row per Paddle op type with a translator (frontend/paddle/op_table.h).
  auto rows = tiller::SupportedOps();
  fmt::print("{:<36} {:<36} {:<40} {:<36} {:<32} {}\n", "paddle op (legacy)", "pir name(s)",
             "ir op(s)", "dtypes", "half precision", "notes");
  for (const auto& r : rows) {
    std::string pir, ir;
    for (const auto& n : r.pir_names) pir += (pir.empty() ? "" : ",") + n;
    if (pir.empty()) pir = "-";
    for (const auto& n : r.ir_ops) ir += (ir.empty() ? "" : ",") + n;
    if (ir.empty()) ir = r.ir_ops_declared ? "(none)" : "-";
    fmt::print("{:<36} {:<36} {:<40} {:<36} {:<32} {}\n", r.paddle_op, pir, ir, r.dtypes, r.half,
               r.notes);
  }
  fmt::print("{} Paddle op types\n", rows.size());
  return 0;
}

int PrintPlan(const tiller::planning::PlanRequest& request) {
  const tiller::planning::PlanReport report = tiller::planning::Plan(request);
  fmt::print("{}", report.text);
  if (!report.fits) {
    std::fflush(stdout);
    fmt::print(stderr, "tiller: the configuration does not fit its device profile ({})\n",
               request.profile);
    return 1;
  }
  return 0;
}

}  // namespace

// The calibration batches in `dir`: each subdirectory (in name order) is a
// batch of NAME.npy files, one per model input; .npy files directly in
// `dir` are one more batch.
std::vector<tiller::quantize::Batch> ReadCalibration(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    Fail(ErrorKind::kNotFound, "--calibrate '{}' is not a directory", dir);
  auto read_batch = [](const fs::path& d) {
    tiller::quantize::Batch b;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(d)) {
      if (e.is_regular_file() && e.path().extension() == ".npy") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) b[f.stem().string()] = tiller::tools::ReadNpy(f.string());
    return b;
  };
  std::vector<fs::path> subdirs;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory()) subdirs.push_back(e.path());
  }
  std::sort(subdirs.begin(), subdirs.end());
  std::vector<tiller::quantize::Batch> batches;
  if (auto top = read_batch(dir); !top.empty()) batches.push_back(std::move(top));
  for (const auto& d : subdirs) {
    if (auto b = read_batch(d); !b.empty()) batches.push_back(std::move(b));
  }
  if (batches.empty())
    Fail(ErrorKind::kNotFound,
         "--calibrate '{}' holds no .npy files (NAME.npy per model input, in the directory or "
         "one subdirectory per batch)",
         dir);
  return batches;
}

int Quantize(const std::string& model, const std::string& params, const std::string& calibrate,
             const std::string& out_dir, const std::string& algo, int threads) {
  std::vector<tiller::quantize::Batch> batches = ReadCalibration(calibrate);
  tiller::quantize::Options opt;
  opt.algo = algo;
  opt.threads = threads;
  // One line rewritten on a terminal; a line per batch in a log.
  opt.progress = [tty = isatty(fileno(stderr)) != 0](size_t done, size_t total) {
    fmt::print(stderr, "{}calibrating: batch {}/{}{}", tty ? "\r" : "", done, total,
               tty && done < total ? "" : "\n");
  };
  const auto r = tiller::quantize::QuantizeModel(model, params, batches, out_dir, opt);
  int n = 0;
  for (const auto& [type, count] : r.quantized) {
    fmt::print("quantized {} x {}\n", count, type);
    n += count;
  }
  for (const auto& s : r.skipped) fmt::print("left float32: {}\n", s);
  fmt::print(
      "{} ops int8 (weights per output channel, {} activations per tensor, {} over {} "
      "batches)\nwrote {} and {}\n",
      n, r.ranges.size(), algo, batches.size(), r.model_file, r.params_file);
  return 0;
}

int main(int argc, char** argv) {
  CLI::App app{"tiller: compile and run PaddlePaddle models"};
  app.require_subcommand(1);
  std::string model, params, out_dir = "tiller_out";
  std::vector<std::string> inputs, shapes;
  int threads = 1, warmup = 3, iters = 20;
  int64_t batch = 1, seq_len = 128;

  auto* info =
      app.add_subcommand("info", "inputs, outputs, op histogram, parameters, planned memory");
  info->add_option("model", model, "model file (.pdmodel/.json) or directory")->required();
  info->add_option("--params", params, "parameter file (default: derived from the model path)");
  info->add_option("--shape", shapes,
                   "input shape NAME=DxD... (dynamic dims default to 1 and 128)");
  DeviceArgs dev;
  bool passes = false;
  info->add_flag("--passes", passes, "also print what each compile stage changed");
  info->add_option("--devices", dev.devices,
                   "backends to compile for, comma-separated, in preference order (default cpu)");
  info->add_option("--placement", dev.placement, "by_shard (default) or first_supported");
  info->add_option("--backend-library", dev.libraries, "load a backend library first");
  info->add_option("--precision", dev.precision,
                   "float32 (default), bfloat16, float16 or half (what --passes then shows)");
  info->add_flag("--no-winograd", dev.no_winograd,
                 "direct convolutions only (what --passes then shows)");

  auto* run = app.add_subcommand("run", "run a model on .npy inputs, write .npy outputs");
  run->add_option("model", model)->required();
  run->add_option("--params", params);
  run->add_option("--input", inputs, "NAME=FILE.npy, one per model input")->required();
  run->add_option("--output-dir", out_dir, "where outputs are written as NAME.npy");
  run->add_option("--threads", threads)->check(CLI::PositiveNumber);
  DeviceArgs traced;
  const char* trace_help =
      "write a Chrome / Perfetto trace of the runs (ui.perfetto.dev): a lane per device";
  run->add_option("--trace", traced.trace, trace_help);
  const char* precision_help =
      "float32 (default), bfloat16, float16 or half: matmul / linear / conv2d multiply in that "
      "type with float32 accumulation";
  run->add_option("--precision", traced.precision, precision_help);
  const char* winograd_help =
      "run every convolution with the direct kernels (default: 3x3 float32 ones of stride 1 use "
      "Winograd's algorithm, results within float32 rounding)";
  run->add_flag("--no-winograd", traced.no_winograd, winograd_help);

  auto* bench = app.add_subcommand("bench", "measure latency on synthetic inputs");
  bench->add_option("model", model)->required();
  bench->add_option("--params", params);
  bench->add_option("--batch", batch, "value of a dynamic first dim")->check(CLI::PositiveNumber);
  bench->add_option("--seq-len", seq_len, "value of a dynamic second dim")
      ->check(CLI::PositiveNumber);
  bench->add_option("--threads", threads)->check(CLI::PositiveNumber);
  bench->add_option("--warmup", warmup)->check(CLI::NonNegativeNumber);
  bench->add_option("--iters", iters)->check(CLI::PositiveNumber);
  bench->add_option("--shape", shapes, "input shape NAME=DxD...");
  bool profile = false;
  bench->add_flag("--profile", profile, "also print time per op type");
  bench->add_option("--trace", traced.trace, trace_help);
  bench->add_option("--precision", traced.precision, precision_help);
  bench->add_flag("--no-winograd", traced.no_winograd, winograd_help);

  auto* quant = app.add_subcommand(
      "quantize", "post-training int8 quantization from calibration inputs (Paddle's format)");
  quant->add_option("model", model, "float32 legacy model (.pdmodel) or directory")->required();
  quant->add_option("--params", params, "parameter file (default: derived from the model path)");
  std::string calibrate, algo = "abs_max";
  quant
      ->add_option("--calibrate", calibrate,
                   "directory of NAME.npy inputs: one batch, or one subdirectory per batch")
      ->required();
  quant->add_option("--output-dir", out_dir, "where model.pdmodel and model.pdiparams go")
      ->required();
  quant->add_option("--algo", algo, "activation range: abs_max (default) or avg over batches")
      ->check(CLI::IsMember({"abs_max", "avg"}));
  int quant_threads = 2;
  quant->add_option("--threads", quant_threads, "calibration threads (default 2)")
      ->check(CLI::PositiveNumber);

  app.add_subcommand("ops", "the Paddle ops Tiller translates");

  auto* plan = app.add_subcommand(
      "plan", "per-device memory and predicted step time of a configuration, without running it");
  tiller::planning::PlanRequest req;
  plan->add_option("model", req.model, "training program (--train) or inference model")->required();
  plan->add_option("--params", req.params, "inference: parameter file");
  plan->add_flag("--train", req.train, "plan a training step (the model is a training program)");
  plan->add_option("--feed", req.feeds, "training: a fed variable (default: the data variables)");
  plan->add_option("--shape", shapes,
                   "feed shape NAME=DxD... (dynamic dims: micro-batch, seq-len)");
  plan->add_option("--seq-len", req.seq_len, "value of a dynamic second dim")
      ->check(CLI::PositiveNumber);
  plan->add_option("--devices", req.devices, "devices of all replicas (Paddle's num_ipus)")
      ->check(CLI::PositiveNumber);
  plan->add_option("--replicas", req.replicas, "data-parallel replicas")
      ->check(CLI::PositiveNumber);
  plan->add_option("--micro-batch", req.micro_batch, "batch of one micro-batch")
      ->check(CLI::PositiveNumber);
  plan->add_option("--accumulate", req.accumulate, "training: micro-batches per update")
      ->check(CLI::PositiveNumber);
  plan->add_option("--batches-per-step", req.batches_per_step, "updates (or micro-batches) per run")
      ->check(CLI::PositiveNumber);
  plan->add_option("--profile", req.profile,
                   "device profile: cpu, ipu-mk2, ipu-bow, h200; NAME:CAPACITY for a what-if "
                   "capacity (default cpu)");
  plan->add_option("--precision", req.precision,
                   "float32 (default), bfloat16, float16 or half: plan half-precision weights, "
                   "copies and activations");
  for (int k = 0; k < 3; ++k) {
    plan->add_option(fmt::format("--accl{}-type", k + 1), req.accl_types[k],
                     fmt::format("training: optimizer state accl{}_type, FLOAT (default) or "
                                 "FLOAT16 (stored in float16)",
                                 k + 1))
        ->check(CLI::IsMember({"FLOAT", "FLOAT16"}));
  }
  plan->add_option("--threads", req.threads, "cpu profile: threads per device")
      ->check(CLI::PositiveNumber);
  bool no_pipeline = false, no_rts = false;
  plan->add_flag("--no-pipeline", no_pipeline, "run the stages one after another");
  plan->add_flag("--fill-drain", req.fill_drain, "pipeline schedule fill-drain (default 1F1B)");
  plan->add_option("--stages-per-device", req.stages_per_device,
                   "pipelined: split by cost into this many stages per device, interleaved "
                   "(default 1: the program's ipu_index, or one stage per device)")
      ->check(CLI::PositiveNumber);
  plan->add_flag("--no-replicated-tensor-sharding", no_rts,
                 "keep the whole optimizer state on every replica");
  plan->add_option("--ranks", req.ranks,
                   "training across this many processes of an MPI job (each with --devices and "
                   "--replicas)")
      ->check(CLI::PositiveNumber);
  double rank_link_gbs = 0, rank_latency_us = 0;
  plan->add_option("--rank-link-gbs", rank_link_gbs,
                   "the processes' link, GB/s (default: the profile's device link)")
      ->check(CLI::NonNegativeNumber);
  plan->add_option("--rank-latency-us", rank_latency_us,
                   "the processes' link, microseconds per message step (default 0)")
      ->check(CLI::NonNegativeNumber);
  plan->add_option("--bucket-bytes", req.all_reduce_bucket_bytes,
                   "gradients per message, bytes (all_reduce_bucket_bytes; 0: one per gradient)")
      ->check(CLI::NonNegativeNumber);
  plan->add_option("--cluster", req.cluster,
                   "cluster file (JSON: profile, ranks, devices_per_rank, link bandwidth_GBps and "
                   "latency_us; see clusters/)");
  plan->add_option("--recompute", req.recompute,
                   "auto_recomputation: 0 none, 1 standard, 3 pipeline, 4 all (default 0)");

  CLI11_PARSE(app, argc, argv);
  try {
    if (info->parsed()) return Info(model, params, shapes, dev, passes);
    if (run->parsed()) return Run(model, params, inputs, out_dir, threads, traced);
    if (quant->parsed()) return Quantize(model, params, calibrate, out_dir, algo, quant_threads);
    if (plan->parsed()) {
      for (const auto& a : shapes) req.shapes.insert(ParseShapeArg(a));
      req.pipelining = !no_pipeline;
      req.replicated_tensor_sharding = !no_rts;
      req.rank_link = rank_link_gbs * 1e9;
      req.rank_latency = rank_latency_us * 1e-6;
      return PrintPlan(req);
    }
    if (bench->parsed())
      return Bench(model, params, batch, seq_len, threads, warmup, iters, shapes, profile, traced);
    return Ops();
  } catch (const tiller::Error& e) {
    fmt::print(stderr, "tiller: error ({}): {}\n", tiller::ErrorKindName(e.kind()), e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    // Past the memory cap's checks (core/memory_cap.h): the machine itself
    // ran out. Said and exited like any error instead of an abort.
    fmt::print(stderr,
               "tiller: error ({}): out of memory (TILLER_MEMORY_CAP sets a cap that "
               "is checked while compiling)\n",
               tiller::ErrorKindName(tiller::ErrorKind::kResourceExhausted));
    return 2;
  } catch (const std::exception& e) {
    // Anything else that escaped the library is a bug, but it still ends
    // with its message and an exit code, not an abort.
    fmt::print(stderr, "tiller: error ({}): {}\n",
               tiller::ErrorKindName(tiller::ErrorKind::kInternal), e.what());
    return 2;
  }
}
