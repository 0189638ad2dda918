// The `tiller` command: inspect, run and benchmark exported Paddle models.
//   tiller info MODEL [--params P] [--shape name=1x128]...
//   tiller run MODEL --input name=file.npy... --output-dir DIR [--trace FILE]
//   tiller bench MODEL [--batch N --seq-len L | --shape name=NxC...] --threads T [--trace FILE]
//   tiller quantize MODEL --calibrate DIR --output-dir OUT [--algo abs_max|avg]
//   tiller ops
//   tiller plan MODEL [--train] --devices N --replicas R --micro-batch B --accumulate G
//               [--profile ipu-mk2]
//   tiller --version
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <new>
#include <set>
#include <sstream>

#include "cli_args.h"
#include "npy.h"
#include "synthetic_feeds.h"
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
using tiller::tools::FeedShapes;
using tiller::tools::FillSynthetic;
using tiller::tools::ResolveShapes;

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

// "cpu,test" -> {"cpu", "test"}.
std::vector<std::string> SplitDevices(const std::string& devices) {
  std::vector<std::string> names;
  std::stringstream ss(devices);
  for (std::string b; std::getline(ss, b, ',');) {
    if (!b.empty()) names.push_back(b);
  }
  return names;
}

Config MakeConfig(const std::string& model, const std::string& params, int threads,
                  const DeviceArgs& dev = {}) {
  Config c;
  if (std::filesystem::is_directory(model))
    c.SetModelDir(model);
  else
    c.SetModel(model, params);
  c.SetCpuMathLibraryNumThreads(threads);
  for (const std::string& lib : dev.libraries) tiller::LoadBackendLibrary(lib);
  c.SetDevices(SplitDevices(dev.devices));
  c.SetPlacement(dev.placement);
  c.EnableTrace(dev.trace);
  c.SetPrecision(dev.precision);
  c.SwitchWinograd(!dev.no_winograd);
  return c;
}

std::string Dims(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

std::string Mib(size_t bytes) {
  return fmt::format("{:.2f} MiB", bytes / 1048576.0);
}

// `tiller info` without a model: the version, the CPU and the instruction
// set chosen for the kernels (tiller.about() prints the same lines).
int About() {
  const tiller::CpuIsaInfo i = tiller::GetCpuIsaInfo();
  fmt::print("tiller {}\n{}", TILLER_VERSION, tiller::DescribeCpuIsa(i));
  if (!i.error.empty()) {
    fmt::print(stderr, "tiller: error ({}): {}\n",
               tiller::ErrorKindName(tiller::ErrorKind::kInvalidArgument), i.error);
    return 2;
  }
  return 0;
}

int Info(const std::string& model, const std::string& params,
         const std::vector<std::string>& shape_args, const DeviceArgs& dev, bool passes) {
  if (model.empty()) return About();
  const tiller::tools::ShapeMap shapes = tiller::tools::ParseShapeArgs(shape_args);
  // Describe the program before compiling, so a model with unsupported ops
  // still gets its op histogram.
  tiller::ModelInfo m = tiller::InspectModel(model, params);
  std::vector<std::string> input_names;
  for (const auto& in : m.inputs) input_names.push_back(in.name);
  tiller::tools::CheckShapeNames(shapes, input_names, "the model's inputs");
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
  FillSynthetic(*p, ResolveShapes(*p, shapes, 1, 128));
  p->Run();
  auto s = p->GetSummary();
  fmt::print("compiled for:");
  for (const auto& n : p->GetInputNames())
    fmt::print(" {}={}", n, Dims(p->GetInputHandle(n)->shape()));
  fmt::print("\n  kernels: {}\n  planned activation memory: {} (one buffer per tensor: {})\n",
             s.num_kernels, Mib(s.arena_bytes), Mib(s.naive_bytes));
  if (passes) {
    fmt::print("compile pipeline (the passes this compile called for, in order):\n{}",
               s.compile_pipeline);
    fmt::print("compile stages (rewrites, ops before -> after, op types added/removed):\n{}",
               s.compile_report);
  }
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

// bench's options; *_given: on the command line, so a value that fills no
// dynamic dim is noted.
struct BenchArgs {
  int64_t batch = 1, seq_len = 128;
  bool batch_given = false, seq_len_given = false;
  int threads = 1, warmup = 3, iters = 20;
  bool profile = false;
};

int Bench(const std::string& model, const std::string& params, const BenchArgs& a,
          const std::vector<std::string>& shape_args, const DeviceArgs& dev) {
  const tiller::tools::ShapeMap given = tiller::tools::ParseShapeArgs(shape_args);
  auto p = tiller::inference::CreatePredictor(MakeConfig(model, params, a.threads, dev));
  tiller::tools::CheckShapeNames(given, p->GetInputNames(), "the model's inputs");
  const FeedShapes shapes = ResolveShapes(*p, given, a.batch, a.seq_len);
  // A number that changed nothing is said, not silently dropped: a CNN has
  // no sequence dimension, a fixed-batch model takes no --batch.
  if (a.batch_given && !shapes.batch_used)
    fmt::print(stderr, "tiller: note: --batch {} unused: no input has a dynamic first dim left\n",
               a.batch);
  if (a.seq_len_given && !shapes.seq_len_used)
    fmt::print(stderr,
               "tiller: note: --seq-len {} unused: no input has a dynamic second dim left\n",
               a.seq_len);
  FillSynthetic(*p, shapes);
  auto t0 = std::chrono::steady_clock::now();
  p->Run();
  double compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("compile + first run: {:.1f} ms\n", compile_ms);
  for (int i = 0; i < a.warmup; ++i) p->Run();
  std::vector<double> ms;
  for (int i = 0; i < a.iters; ++i) {
    auto s = std::chrono::steady_clock::now();
    p->Run();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
    if (a.iters >= 20 && (i + 1) % (a.iters / 4) == 0)
      fmt::print(stderr, "  {}/{} runs\n", i + 1, a.iters);
  }
  std::sort(ms.begin(), ms.end());
  double median = ms[ms.size() / 2];
  // Samples per run: the first dim of the first input that has one, as run
  // (--shape's, --batch's or the declared one), not --batch's default.
  int64_t samples = 1;
  for (const std::string& n : p->GetInputNames()) {
    const std::vector<int64_t>& d = shapes.dims.at(n);
    if (!d.empty()) {
      samples = d[0];
      break;
    }
  }
  if (shapes.seq_len_used) {
    fmt::print("threads {}  batch {}  seq_len {}\n", a.threads, samples, a.seq_len);
  } else {
    fmt::print("threads {}  batch {}  inputs", a.threads, samples);
    for (const std::string& n : p->GetInputNames())
      fmt::print(" {}={}", n, Dims(shapes.dims.at(n)));
    fmt::print("\n");
  }
  fmt::print("latency: median {:.3f} ms  min {:.3f} ms  max {:.3f} ms  ({} runs)\n", median,
             ms.front(), ms.back(), a.iters);
  fmt::print("throughput: {:.1f} samples/s\n", samples * 1000.0 / median);
  if (a.profile) {
    p->EnableProfiling(true);
    for (int i = 0; i < a.iters; ++i) p->Run();
    fmt::print("profile ({} runs, per run):\n  {:<24} {:>10} {:>7} {:>6}\n", a.iters, "op", "ms",
               "%", "calls");
    double total = 0;
    for (const auto& [type, ms, calls] : p->GetProfile()) total += ms;
    for (const auto& [type, ms, calls] : p->GetProfile())
      fmt::print("  {:<24} {:>10.3f} {:>6.1f}% {:>6}\n", type, ms / a.iters, 100.0 * ms / total,
                 calls / a.iters);
  }
  return 0;
}

int BackendOps(const std::string& backend) {
  // The IR ops a backend has kernels for, each signature with its dtypes.
  const auto kernels = tiller::BackendKernels(backend);
  fmt::print("{:<24} {}\n", "ir op", fmt::format("{} kernel signatures (dtypes)", backend));
  for (const auto& k : kernels) {
    for (size_t i = 0; i < k.signatures.size(); ++i)
      fmt::print("{:<24} {}\n", i ? "" : k.ir_op, k.signatures[i]);
  }
  fmt::print("{} IR ops with {} kernels; the others run on another device (first_supported)\n",
             kernels.size(), backend);
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

// plan's --shape names: an inference model's inputs, or a training
// program's --feed variables, said in the CLI's words; Plan() itself refuses
// a name a training program does not feed (its data variables).
void CheckPlanShapeNames(const tiller::planning::PlanRequest& r) {
  if (r.shapes.empty()) return;
  if (!r.train) {
    std::vector<std::string> names;
    for (const auto& in : tiller::InspectModel(r.model, r.params).inputs) names.push_back(in.name);
    tiller::tools::CheckShapeNames(r.shapes, names, "the model's inputs");
  } else if (!r.feeds.empty()) {
    tiller::tools::CheckShapeNames(r.shapes, r.feeds, "the --feed variables");
  }
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
  app.name("tiller");
  app.require_subcommand(1);
  // Every option's default shows in --help. Subcommands copy the option
  // defaults when they are made, so this comes before them.
  app.option_defaults()->always_capture_default();
  // TILLER_VERSION: CMake's project version (CMakeLists.txt), the one source.
  app.set_version_flag("-V,--version", std::string("tiller ") + TILLER_VERSION,
                       "print the version and exit");
  std::string model, params, out_dir = "tiller_out";
  std::vector<std::string> inputs, shapes;
  int threads = 1;
  // CLI11's own PositiveNumber prints [DBL_MIN - DBL_MAX] in full.
  const CLI::Validator positive_int = tiller::tools::WholeNumber(1, INT32_MAX);
  const CLI::Validator positive_int64 = tiller::tools::WholeNumber(1, INT64_MAX);
  const char* model_help = "model file (.json/.pdmodel) or directory";
  const char* params_help = "parameter file (default: derived from the model path)";
  const char* threads_help = "CPU math-library threads";

  auto* info = app.add_subcommand(
      "info",
      "inputs, outputs, op histogram, parameters, planned memory; without a model: the "
      "version, the CPU and the instruction set chosen (TILLER_MAX_ISA)");
  info->add_option("model", model, model_help);
  info->add_option("--params", params, params_help);
  info->add_option("--shape", shapes,
                   "input shape NAME=DxD..., every size >= 1 (else dynamic dims are 1 and 128)");
  DeviceArgs dev;
  bool passes = false;
  info->add_flag("--passes", passes, "also print what each compile stage changed");
  info->add_option("--devices", dev.devices,
                   "backends to compile for, comma-separated, in preference order");
  info->add_option("--placement", dev.placement, "by_shard or first_supported");
  info->add_option("--backend-library", dev.libraries, "load a backend library first");
  info->add_option("--precision", dev.precision,
                   "float32, bfloat16, float16 or half (what --passes then shows)");
  info->add_flag("--no-winograd", dev.no_winograd,
                 "direct convolutions only (what --passes then shows)");

  auto* run = app.add_subcommand("run", "run a model on .npy inputs, write .npy outputs");
  run->add_option("model", model, model_help)->required();
  run->add_option("--params", params, params_help);
  run->add_option("--input", inputs, "NAME=FILE.npy, one per model input")->required();
  run->add_option("--output-dir", out_dir, "where outputs are written as NAME.npy");
  run->add_option("--threads", threads, threads_help)->check(positive_int);
  DeviceArgs traced;
  const char* trace_help =
      "write a Chrome / Perfetto trace of the runs (ui.perfetto.dev): a lane per device";
  run->add_option("--trace", traced.trace, trace_help);
  const char* precision_help =
      "float32, bfloat16, float16 or half: matmul / linear / conv2d multiply in that type with "
      "float32 accumulation";
  run->add_option("--precision", traced.precision, precision_help);
  const char* winograd_help =
      "run every convolution with the direct kernels (default: 3x3 float32 ones of stride 1 use "
      "Winograd's algorithm, results within float32 rounding)";
  run->add_flag("--no-winograd", traced.no_winograd, winograd_help);
  const char* devices_help =
      "devices to compile for, comma-separated, in preference order: cpu, cuda, cuda:N, "
      "cuda:N.M (default cpu)";
  const char* placement_help =
      "by_shard (ops by their ipu_index) or first_supported (each op on the first device with "
      "a kernel for it: cuda:0,cpu runs what the GPU lacks on the CPU)";
  run->add_option("--devices", traced.devices, devices_help);
  run->add_option("--placement", traced.placement, placement_help);

  auto* bench = app.add_subcommand("bench", "measure latency and throughput on synthetic inputs");
  BenchArgs bench_args;
  bench->add_option("model", model, model_help)->required();
  bench->add_option("--params", params, params_help);
  bench
      ->add_option("--batch", bench_args.batch,
                   "size of a dynamic first dim (inputs without --shape)")
      ->check(positive_int64);
  bench
      ->add_option("--seq-len", bench_args.seq_len,
                   "size of a dynamic second dim (inputs without --shape)")
      ->check(positive_int64);
  bench->add_option("--threads", bench_args.threads, threads_help)->check(positive_int);
  bench->add_option("--warmup", bench_args.warmup, "untimed runs after the first")
      ->check(tiller::tools::WholeNumber(0, INT32_MAX));
  bench->add_option("--iters", bench_args.iters, "timed runs; the median is reported")
      ->check(positive_int);
  bench->add_option("--shape", shapes,
                    "input shape NAME=DxD..., every size >= 1; its first dim is the batch");
  bench->add_flag("--profile", bench_args.profile, "also print time per op type");
  bench->add_option("--trace", traced.trace, trace_help);
  bench->add_option("--precision", traced.precision, precision_help);
  bench->add_flag("--no-winograd", traced.no_winograd, winograd_help);
  bench->add_option("--devices", traced.devices, devices_help);
  bench->add_option("--placement", traced.placement, placement_help);

  auto* quant = app.add_subcommand(
      "quantize", "post-training int8 quantization from calibration inputs (Paddle's format)");
  quant->add_option("model", model, "float32 legacy model (.pdmodel) or directory")->required();
  quant->add_option("--params", params, params_help);
  std::string calibrate, algo = "abs_max", quant_out;
  quant
      ->add_option("--calibrate", calibrate,
                   "directory of NAME.npy inputs: one batch, or one subdirectory per batch")
      ->required();
  quant->add_option("--output-dir", quant_out, "where model.pdmodel and model.pdiparams go")
      ->required();
  quant->add_option("--algo", algo, "activation range: abs_max or avg over batches")
      ->check(CLI::IsMember({"abs_max", "avg"}));
  int quant_threads = 2;
  quant->add_option("--threads", quant_threads, "calibration threads")->check(positive_int);

  auto* ops = app.add_subcommand("ops", "the Paddle ops Tiller translates");
  std::string ops_backend;
  ops->add_option("--backend", ops_backend,
                  "instead: the IR ops this backend has kernels for, with their dtypes (cuda, "
                  "cpu, or one loaded with --backend-library)");
  std::vector<std::string> ops_libraries;
  ops->add_option("--backend-library", ops_libraries, "load a backend library first");

  auto* passes_cmd = app.add_subcommand(
      "passes", "the passes a compile runs after autodiff, in order, and when each runs");
  DeviceArgs pass_dev;
  passes_cmd->add_option("--devices", pass_dev.devices,
                         "comma-separated backends of the devices (each adds its own passes)");
  passes_cmd->add_option("--backend-library", pass_dev.libraries, "load a backend library first");

  auto* plan = app.add_subcommand(
      "plan", "per-device memory and predicted step time of a configuration, without running it");
  tiller::planning::PlanRequest req;
  plan->add_option("model", req.model, "training program (--train) or inference model")->required();
  plan->add_option("--params", req.params, "inference: " + std::string(params_help));
  plan->add_flag("--train", req.train, "plan a training step (the model is a training program)");
  plan->add_option("--feed", req.feeds, "training: a fed variable (default: the data variables)");
  plan->add_option("--shape", shapes,
                   "feed shape NAME=DxD..., every size >= 1 (else dynamic dims: micro-batch, "
                   "seq-len)");
  plan->add_option("--seq-len", req.seq_len, "size of a dynamic second dim")->check(positive_int64);
  plan->add_option("--devices", req.devices, "devices of all replicas (Paddle's num_ipus)")
      ->check(positive_int);
  plan->add_option("--replicas", req.replicas, "data-parallel replicas")->check(positive_int);
  plan->add_option("--micro-batch", req.micro_batch, "batch of one micro-batch")
      ->check(positive_int);
  plan->add_option("--accumulate", req.accumulation.factor, "training: micro-batches per update")
      ->check(positive_int);
  plan->add_option("--batches-per-step", req.batches_per_step, "updates (or micro-batches) per run")
      ->check(positive_int);
  plan->add_option("--profile", req.profile,
                   "device profile: cpu, ipu-mk2, ipu-bow, h200; NAME:CAPACITY for a what-if "
                   "capacity");
  plan->add_option("--precision", req.precision.compute,
                   "float32, bfloat16, float16 or half: plan half-precision weights, copies and "
                   "activations");
  for (int k = 0; k < 3; ++k) {
    plan->add_option(fmt::format("--accl{}-type", k + 1), req.precision.accl_types[k],
                     fmt::format("training: optimizer state accl{}_type, FLOAT or FLOAT16 "
                                 "(stored in float16)",
                                 k + 1))
        ->check(CLI::IsMember({"FLOAT", "FLOAT16"}));
  }
  plan->add_option("--threads", req.threads, "cpu profile: threads per device")
      ->check(positive_int);
  bool no_pipeline = false, no_rts = false, fill_drain = false;
  plan->add_flag("--no-pipeline", no_pipeline, "run the stages one after another");
  plan->add_flag("--fill-drain", fill_drain, "pipeline schedule fill-drain (default 1F1B)");
  plan->add_option("--stages-per-device", req.split.stages_per_device,
                   "pipelined: split by cost into this many stages per device, interleaved "
                   "(1: the program's ipu_index, or one stage per device)")
      ->check(positive_int);
  plan->add_flag("--no-replicated-tensor-sharding", no_rts,
                 "keep the whole optimizer state on every replica");
  plan->add_option("--ranks", req.ranks,
                   "training across this many processes of an MPI job (each with --devices and "
                   "--replicas)")
      ->check(positive_int);
  double rank_link_gbs = 0, rank_latency_us = 0;
  plan->add_option("--rank-link-gbs", rank_link_gbs,
                   "the processes' link, GB/s (0: the profile's device link)")
      ->check(tiller::tools::NonNegativeReal());
  plan->add_option("--rank-latency-us", rank_latency_us,
                   "the processes' link, microseconds per message step")
      ->check(tiller::tools::NonNegativeReal());
  plan->add_option("--bucket-bytes", req.collectives.all_reduce_bucket_bytes,
                   "gradients per message, bytes (all_reduce_bucket_bytes; 0: one per gradient)")
      ->check(tiller::tools::WholeNumber(0, INT64_MAX));
  plan->add_option("--cluster", req.cluster,
                   "cluster file (JSON: profile, ranks, devices_per_rank, link bandwidth_GBps and "
                   "latency_us; see clusters/)");
  int64_t recompute = 0;
  plan->add_option("--recompute", recompute,
                   "auto_recomputation: 0 none, 1 standard, 3 pipeline, 4 all");

  const std::vector<CLI::App*> subcommands = {info, run, bench, quant, ops, plan, passes_cmd};
  // A list option's captured default is "[]", which says nothing: none shown.
  for (CLI::App* s : subcommands) {
    for (CLI::Option* o : s->get_options()) {
      if (o->get_default_str() == "[]") o->default_str("");
    }
  }
  if (argc < 2) {
    // Nothing to do: the usage, as an error (a script that lost its
    // arguments should not pass).
    std::cerr << app.help();
    return 2;
  }
  // The top level takes only flags, so a first word that is no subcommand is
  // a typo; CLI11 would say only "A subcommand is required".
  if (argv[1][0] != '-' &&
      std::none_of(subcommands.begin(), subcommands.end(),
                   [&](const CLI::App* s) { return s->get_name() == argv[1]; })) {
    std::string names;
    for (const CLI::App* s : subcommands) names += (names.empty() ? "" : ", ") + s->get_name();
    fmt::print(stderr, "tiller: error ({}): unknown subcommand '{}'; subcommands: {}\n",
               tiller::ErrorKindName(ErrorKind::kInvalidArgument), argv[1], names);
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end with 0. Every other parse or validation error
    // is a usage error: exit code 2 as the library's errors (README), in a
    // line, not CLI11's own codes (105 for a validation error).
    if (e.get_exit_code() == 0) return app.exit(e);
    fmt::print(stderr, "tiller: error ({}): {}; see tiller {}--help\n",
               tiller::ErrorKindName(ErrorKind::kInvalidArgument), e.what(),
               argv[1][0] != '-' ? std::string(argv[1]) + " " : "");
    return 2;
  }
  try {
    if (info->parsed()) return Info(model, params, shapes, dev, passes);
    if (run->parsed()) return Run(model, params, inputs, out_dir, threads, traced);
    if (quant->parsed()) return Quantize(model, params, calibrate, quant_out, algo, quant_threads);
    if (plan->parsed()) {
      req.shapes = tiller::tools::ParseShapeArgs(shapes);
      CheckPlanShapeNames(req);
      req.pipeline.enabled = !no_pipeline;
      if (fill_drain) req.pipeline.schedule = tiller::PipelineSettings::Schedule::kFillDrain;
      req.accumulation.enabled = req.accumulation.factor > 1;
      req.collectives.shard_optimizer_state = !no_rts;
      req.recompute = tiller::RecomputeSettings::FromAutoRecomputation(recompute);
      req.rank_link = rank_link_gbs * 1e9;
      req.rank_latency = rank_latency_us * 1e-6;
      return PrintPlan(req);
    }
    if (bench->parsed()) {
      bench_args.batch_given = bench->count("--batch") > 0;
      bench_args.seq_len_given = bench->count("--seq-len") > 0;
      return Bench(model, params, bench_args, shapes, traced);
    }
    if (passes_cmd->parsed()) {
      for (const std::string& lib : pass_dev.libraries) tiller::LoadBackendLibrary(lib);
      fmt::print("{}", tiller::DescribeCompilePipeline(SplitDevices(pass_dev.devices)));
      return 0;
    }
    for (const std::string& lib : ops_libraries) tiller::LoadBackendLibrary(lib);
    if (!ops_backend.empty()) return BackendOps(ops_backend);
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
