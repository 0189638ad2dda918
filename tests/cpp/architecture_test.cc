// The pieces of the multi-device architecture on small graphs: typed
// attributes, placement scopes through passes and autodiff, kernel
// signatures, devices and streams, placement with copies between a
// host-inaccessible test device and the CPU (tests/backend, loaded as a
// library like any third-party backend), and the verifier.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <thread>

#include "backend/backend.h"
#include "backend/kernel.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernel.h"
#include "compile/compile_pipeline.h"
#include "compile/driver.h"
#include "compile/placement.h"
#include "core/error.h"
#include "ir/op_schema.h"
#include "passes/autodiff.h"
#include "passes/pass.h"
#include "tiller/backends.h"

namespace tiller {
namespace {

using ir::Graph;
using ir::Value;

void LoadTestBackend() {
  LoadBackendLibrary(TILLER_TEST_BACKEND);
}

std::shared_ptr<AlignedBuffer> Random(const Shape& shape, uint32_t seed) {
  auto buf = std::make_shared<AlignedBuffer>(NumElements(shape) * sizeof(float));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t i = 0; i < NumElements(shape); ++i) buf->as<float>()[i] = d(rng);
  return buf;
}

// ---- typed attributes -------------------------------------------------------

const bool kSchemas = [] {
  ir::RegisterOpSchema(
      ir::OpSchema{"arch_test_op", 1, 1, [](ir::InferContext& c) { c.AddOutput(c.input(0)); }}
          .Attr("alpha", 0.5)
          .Attr("axis", int64_t{-1})
          .Attr("mode", "fast")
          .RequiredAttr("shape", ir::AttrKind::kInts)
          .Precision(ir::PrecisionRule::kFollowsInput)
          .Layout(ir::LayoutRule::kAxisAttrs, {"axis"}));
  ir::RegisterOpSchema(ir::OpSchema{
      "arch_test_pair", 2, 3, [](ir::InferContext& c) {
        c.AddOutput(c.input(0));
      }}.NoAttrs());
  ir::RegisterOpSchema(ir::OpSchema{
      "arch_test_threads", 1, 1, [](ir::InferContext& c) {
        c.AddOutput(c.input(0));
      }}.NoAttrs());
  return true;
}();

TEST(TypedAttributes, DefaultsComeFromTheSchemaAndValuesAreConverted) {
  ASSERT_TRUE(kSchemas);
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {2}});
  // An int given for a float attribute is converted at AddOp.
  ir::Op* op =
      g.AddOp("arch_test_op", {x}, {{"shape", std::vector<int64_t>{2}}, {"alpha", int64_t{2}}});
  EXPECT_EQ(op->GetFloat("alpha"), 2.0);
  EXPECT_EQ(op->GetInt("axis"), -1);
  EXPECT_EQ(op->GetStr("mode"), "fast");
  EXPECT_EQ(op->GetInts("shape"), (std::vector<int64_t>{2}));
  ir::Verify(g);
}

TEST(TypedAttributes, UndeclaredWrongKindAndMissingRequiredAreInternalErrors) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {2}});
  auto expect_internal = [&](ir::AttrMap attrs, const char* fragment) {
    try {
      g.AddOp("arch_test_op", {x}, std::move(attrs), "probe");
      FAIL() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInternal);
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_internal({{"shape", std::vector<int64_t>{2}}, {"beta", 1.0}}, "'beta' is not declared");
  expect_internal({{"shape", std::vector<int64_t>{2}}, {"axis", 1.5}}, "'axis' = 1.5 is not a int");
  expect_internal({{"alpha", 1.0}}, "required attribute 'shape' is missing");
  ir::Op* op = g.AddOp("arch_test_op", {x}, {{"shape", std::vector<int64_t>{2}}});
  EXPECT_THROW(op->GetFloat("axis"), Error);   // declared an int
  EXPECT_THROW(op->GetFloat("gamma"), Error);  // not declared
}

TEST(TypedAttributes, EveryOpIsDeclaredOnceWithAttributesPrecisionAndLayout) {
  int checked = 0;
  for (const std::string& name : ir::AllOpSchemaNames()) {
    if (name.find("_test") != std::string::npos) continue;  // registered by tests
    const ir::OpSchema* s = ir::FindOpSchema(name);
    EXPECT_TRUE(s->attrs_declared) << name;
    EXPECT_NE(s->precision, ir::PrecisionRule::kUndeclared) << name;
    EXPECT_NE(s->layout, ir::LayoutRule::kUndeclared) << name;
    if (s->layout == ir::LayoutRule::kAxisAttrs) {
      EXPECT_FALSE(s->axis_attrs.empty()) << name;
      for (const std::string& a : s->axis_attrs)
        EXPECT_NE(s->FindAttr(a), nullptr) << name << "." << a;
    }
    ++checked;
  }
  EXPECT_GT(checked, 140);
  // A schema that does not say its attributes cannot be registered.
  EXPECT_THROW(ir::RegisterOpSchema({"arch_test_undeclared", 1, 1, [](ir::InferContext&) {}}),
               Error);
}

// ---- placement scopes ---------------------------------------------------------

TEST(PlacementScope, OpsTakeTheScopeAndRewritesTakeThePlacementOfWhatTheyReplace) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {4, 8}});
  Value* w = g.AddData("w", {DType::kF32, {8, 3}}, ir::ValueKind::kParam, Random({8, 3}, 1));
  Value* b = g.AddData("b", {DType::kF32, {3}}, ir::ValueKind::kParam, Random({3}, 2));
  Value* y;
  {
    ir::ScopedPlacement s(g, {1, 2, ir::Phase::kForward});
    y = g.Add1("add", {g.Add1("matmul", {x, w}), b});
  }
  Value* z = g.Add1("relu", {y});
  g.AddOutput("z", z);
  EXPECT_EQ(y->producer->placement, (ir::Placement{1, 2, ir::Phase::kForward}));
  EXPECT_EQ(z->producer->placement, ir::Placement{});
  EXPECT_EQ(passes::FuseLinear(g), 1);
  for (const auto& op : g.ops()) {
    if (op->type == "linear") {
      EXPECT_EQ(op->placement, (ir::Placement{1, 2, ir::Phase::kForward}));
    }
  }
  EXPECT_EQ(g.placement_scope(), ir::Placement{});  // restored after the rewrite
}

TEST(PlacementScope, AutodiffPutsGradientsWithTheirForwardOpInTheBackwardPhase) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {4, 8}});
  Value* h;
  {
    ir::ScopedPlacement s(g, {0, 0, ir::Phase::kForward});
    h = g.Add1("tanh", {x});
  }
  Value* loss;
  {
    ir::ScopedPlacement s(g, {1, 1, ir::Phase::kForward});
    loss = g.Add1("reduce_sum", {g.Add1("mul", {h, h})},
                  {{"axes", std::vector<int64_t>{}}, {"keepdim", false}});
  }
  size_t forward_ops = g.ops().size();
  passes::BuildBackward(g, loss, {x});
  ASSERT_GT(g.ops().size(), forward_ops);
  for (const auto& op : g.ops()) {
    if (op->placement.phase == ir::Phase::kForward) continue;
    EXPECT_EQ(op->placement.phase, ir::Phase::kBackward) << op->name;
    // A rule's ops are named after the forward op they differentiate
    // ("<forward>.grad"); sums of fan-out gradients belong to a consumer's rule.
    if (op->name.find(".grad_sum") != std::string::npos) continue;
    int want = op->name.rfind("tanh", 0) == 0 ? 0 : 1;
    EXPECT_EQ(op->placement.stage, want) << op->type << " " << op->name;
    EXPECT_EQ(op->placement.shard, want) << op->type << " " << op->name;
  }
}

// ---- signatures ------------------------------------------------------------------

TEST(Signature, MatchesEveryTensorAndSaysWhyNot) {
  Graph g;
  Value* f = g.AddInput("f", {DType::kF32, {2}});
  Value* i = g.AddInput("i", {DType::kI64, {2}});
  ir::Op* add = g.AddOp("arch_test_pair", {f, f});
  ir::Op* mixed = g.AddOp("arch_test_pair", {f, i});
  backend::Signature same("T, T -> T");
  same.Where("T", {DType::kF32, DType::kF64});
  EXPECT_FALSE(same.Mismatch(*add));
  auto why = same.Mismatch(*mixed);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("dtype int64 of input 1 'i' is not supported (supported: float32)"),
            std::string::npos)
      << *why;
  backend::Signature variadic = backend::Signature("T... -> T").Where("T", {DType::kF32});
  EXPECT_FALSE(variadic.Mismatch(*add));
  backend::Signature optional = backend::Signature("T, T, T? -> T").Where("T", {DType::kF32});
  EXPECT_FALSE(optional.Mismatch(*add));
  backend::Signature to_bool = backend::Signature("T, T -> bool").Where("T", {DType::kF32});
  auto bad_out = to_bool.Mismatch(*add);
  ASSERT_TRUE(bad_out);
  EXPECT_NE(bad_out->find("of output 0"), std::string::npos) << *bad_out;
  EXPECT_THROW(backend::Signature("T -> T").Validate("no dtypes for T"), Error);
}

// ---- devices and streams ----------------------------------------------------------

TEST(CpuDevice, StreamRunsInOrderOnItsOwnThreadAndRethrowsTheFirstError) {
  backend::Backend* cpu = backend::FindBackend("cpu");
  ASSERT_NE(cpu, nullptr);
  auto dev = cpu->CreateDevice(0, {2, 0});
  EXPECT_TRUE(dev->host_accessible());
  EXPECT_EQ(dev->name(), "cpu:0");
  std::vector<int> order;
  std::thread::id caller = std::this_thread::get_id(), worker;
  for (int k = 0; k < 5; ++k) dev->stream().Submit([&, k] { order.push_back(k); });
  dev->stream().Submit([&] { worker = std::this_thread::get_id(); });
  dev->stream().Synchronize();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(worker != caller);
  bool ran_after = false;
  dev->stream().Submit([] { Fail(ErrorKind::kNonFinite, "first"); });
  dev->stream().Submit([&] { ran_after = true; });
  try {
    dev->stream().Synchronize();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNonFinite);
  }
  EXPECT_FALSE(ran_after);  // skipped after the failure
  dev->stream().Submit([&] { ran_after = true; });
  dev->stream().Synchronize();  // the error was reported once
  EXPECT_TRUE(ran_after);
}

// What a kernel saw when it was created and when it ran (arch_test_threads).
struct ThreadsSeen {
  int created = 0, ran = 0;
};
ThreadsSeen threads_seen;
const bool kThreadsKernel = cpu::RegisterKernel(
    "arch_test_threads",
    [](const ir::Op&) -> std::unique_ptr<backend::Kernel> {
      threads_seen.created = omp_get_max_threads();
      return std::make_unique<backend::LambdaKernel>([](const backend::KernelArgs& a) {
        threads_seen.ran = omp_get_max_threads();
        std::memcpy(a.outputs[0], a.inputs[0], sizeof(float));
      });
    },
    backend::Signature("T -> T").Where("T", {DType::kF32}));

// oneDNN decides how to split work by the thread count of the thread that
// creates a primitive: kernels must be created, like run, with the device's
// threads, whatever the caller's OpenMP setting (Paddle sets
// OMP_NUM_THREADS=1 when it is imported).
TEST(CpuDevice, KernelsAreCreatedAndRunWithTheDevicesThreads) {
  ASSERT_TRUE(kThreadsKernel && kSchemas);
  int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  auto g = std::make_unique<Graph>();
  g->AddOutput("y", g->Add1("arch_test_threads", {g->AddInput("x", {DType::kF32, {1}})}));
  auto exe = compile::Executable::Build(std::move(g), compile::CompileOptions::Cpu(3));
  EXPECT_EQ(threads_seen.created, 3);
  exe->Run();
  EXPECT_EQ(threads_seen.ran, 3);
  EXPECT_EQ(omp_get_max_threads(), 1);  // the caller's setting is left alone
  omp_set_num_threads(saved);
}

// A step whose devices run one at a time (Run) lends the idle CPU devices'
// threads to the one working: the device of 1 thread runs with 1 + 2; its
// own setting is back for work submitted afterwards.
TEST(CpuDevice, RunLendsTheIdleDevicesThreadsToTheWorkingOne) {
  ASSERT_TRUE(kThreadsKernel && kSchemas);
  auto g = std::make_unique<Graph>();
  g->AddOutput("y", g->Add1("arch_test_threads", {g->AddInput("x", {DType::kF32, {1}})}));
  backend::Backend* cpu = backend::FindBackend("cpu");
  auto one = cpu->CreateDevice(0, {1, 0});
  auto two = cpu->CreateDevice(1, {2, 0});
  std::vector<backend::Device*> devices = {one.get(), two.get()};
  compile::PlaceOps(*g, devices, compile::PlacementPolicy::kByShard);  // shard 0
  compile::InsertCopies(*g, compile::HostDevice(devices), compile::HostMemoryDevices(devices));
  auto exe = compile::Executable::BuildPlaced(std::move(g), devices);
  EXPECT_EQ(threads_seen.created, 1);  // created with its device's own threads
  exe->Run();
  EXPECT_EQ(threads_seen.ran, 3);
  int after = 0;
  one->stream().Submit([&] { after = omp_get_max_threads(); });
  one->stream().Synchronize();
  EXPECT_EQ(after, 1);
}

// libgomp sleeps between parallel regions, in every team, once the process's
// OpenMP pool threads outnumber the CPUs (two predictors of 2 threads on 2
// cores ran BERT 50-80% slower): an idle worker then gives its team back,
// and builds it again for its next item; alone, it keeps it.
TEST(CpuDevice, IdleTeamsAreReleasedOnlyWhileTheTeamsOversubscribeTheCpus) {
  const int cpus = omp_get_num_procs();
  if (cpus < 2) GTEST_SKIP() << "one CPU: no team has pool threads";
  backend::Backend* cpu = backend::FindBackend("cpu");
  auto team_size = [](backend::Device& d) {
    int n = 0;
    d.stream().Submit([&] {
#pragma omp parallel
      {
#pragma omp single
        n = omp_get_num_threads();
      }
    });
    d.stream().Synchronize();
    return n;
  };
  auto pooled_after_idling = [] {
    // Long enough for an idle worker to notice (kPoolIdleRelease) on a busy
    // machine; returns early once nothing oversubscribes.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (1 + cpu::WorkerStream::PooledThreads() > omp_get_num_procs() &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return cpu::WorkerStream::PooledThreads();
  };
  auto b = cpu->CreateDevice(0, {cpus, 0});
  {
    auto a = cpu->CreateDevice(0, {cpus, 0});
    EXPECT_EQ(team_size(*a), cpus);
    EXPECT_EQ(team_size(*b), cpus);
    // Both teams hold cpus - 1 pool threads each: one of them goes.
    EXPECT_LE(1 + pooled_after_idling(), cpus);
    EXPECT_EQ(team_size(*a), cpus);  // rebuilt where released
    EXPECT_EQ(team_size(*b), cpus);
    EXPECT_LE(1 + pooled_after_idling(), cpus);
  }
  // a's thread has ended, its pool with it; b's team stays while it idles.
  EXPECT_EQ(team_size(*b), cpus);
  std::this_thread::sleep_for(4 * cpu::WorkerStream::kPoolIdleRelease);
  EXPECT_GE(cpu::WorkerStream::PooledThreads(), cpus - 1);
}

// TILLER_KEEP_WARM_MS: after its queue runs empty following a run
// (SubmitWithThreads; not after kernel building, Submit, which comes while
// the caller compiles) a worker keeps its team spinning for that long (the
// process uses CPU time), an item submitted
// meanwhile starts at once, the spin ends by itself after the window (the
// process is quiet again) and when the device goes; a value that is no
// number of milliseconds is refused when the device is made.
TEST(CpuDevice, AKeptWarmTeamSpinsForItsWindowOnlyAndTakesWorkAtOnce) {
  backend::Backend* cpu = backend::FindBackend("cpu");
  auto cpu_ms = [] {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
  };
  using Clock = std::chrono::steady_clock;
  const auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  setenv("TILLER_KEEP_WARM_MS", "300", 1);
  auto dev = cpu->CreateDevice(0, {2, 0});
  unsetenv("TILLER_KEEP_WARM_MS");
  std::atomic<int> ran{0};
  // Kernel building: no spin after it.
  dev->stream().Submit([&] { ++ran; });
  dev->stream().Synchronize();
  const double cpu_build = cpu_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_LT(cpu_ms() - cpu_build, 20.0) << "spinning after kernel building";
  dev->stream().SubmitWithThreads([&] { ++ran; }, 2);
  dev->stream().Synchronize();
  // Within the window: spinning (CPU time goes by) and work starts at once.
  const double cpu0 = cpu_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_GT(cpu_ms() - cpu0, 20.0) << "no spin within the window";
  const auto t0 = Clock::now();
  dev->stream().SubmitWithThreads([&] { ++ran; }, 2);
  dev->stream().Synchronize();
  EXPECT_LT(ms_since(t0), 100.0) << "the item waited for the window's end";
  // After the window (300 ms from that item): quiet.
  std::this_thread::sleep_for(std::chrono::milliseconds(450));
  const double cpu1 = cpu_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LT(cpu_ms() - cpu1, 40.0) << "still spinning after the window";
  // A device destroyed while it spins stops at once.
  dev->stream().SubmitWithThreads([&] { ++ran; }, 2);
  dev->stream().Synchronize();
  const auto t1 = Clock::now();
  dev.reset();
  EXPECT_LT(ms_since(t1), 150.0);
  EXPECT_EQ(ran.load(), 4);
  setenv("TILLER_KEEP_WARM_MS", "soon", 1);
  try {
    cpu->CreateDevice(0, {2, 0});
    ADD_FAILURE() << "TILLER_KEEP_WARM_MS=soon accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("TILLER_KEEP_WARM_MS=soon"), std::string::npos)
        << e.what();
  }
  unsetenv("TILLER_KEEP_WARM_MS");
}

// A device that adapts to contention runs with half its team after an item
// during which its thread got little CPU time (here: it slept, as a thread
// the scheduler leaves out does), kProbeEvery items, then measures with the
// full team again, unless halving did not make its first item faster; one
// that does not adapt, or an item too short to tell, keeps the full team.
TEST(CpuDevice, TeamHalvesAfterAContendedItemAndProbesAgain) {
  backend::Backend* cpu = backend::FindBackend("cpu");
  auto team_of = [](backend::Device& d, std::chrono::milliseconds starved) {
    int n = 0;
    d.stream().SubmitWithThreads(
        [&] {
          n = omp_get_max_threads();
          std::this_thread::sleep_for(starved);
        },
        d.threads());
    d.stream().Synchronize();
    return n;
  };
  using std::chrono::milliseconds;
  const milliseconds starved{3 * cpu::WorkerStream::kMinMeasured.count() / 1000 + 3};
  auto adaptive = cpu->CreateDevice(0, {4, 0, true});
  EXPECT_EQ(team_of(*adaptive, milliseconds(0)), 4);
  EXPECT_EQ(team_of(*adaptive, starved), 4);  // measured: contended
  for (int i = 0; i < cpu::WorkerStream::kProbeEvery; ++i)
    EXPECT_EQ(team_of(*adaptive, milliseconds(0)), 2) << i;
  EXPECT_EQ(team_of(*adaptive, milliseconds(0)), 4);  // the probe
  // A probe that finds the CPU busy again halves the team again.
  EXPECT_EQ(team_of(*adaptive, starved), 4);
  EXPECT_EQ(team_of(*adaptive, milliseconds(0)), 2);

  // A halved item no faster than the full-team one before it: halving is
  // given up for the next kSkipHalvingAfterNoGain items.
  for (int i = 0; i < cpu::WorkerStream::kProbeEvery; ++i) team_of(*adaptive, milliseconds(0));
  EXPECT_EQ(team_of(*adaptive, starved), 4);  // contended
  // Halved, and slower (three times: a loaded machine may stretch the
  // full-team item's sleep, and the comparison must not depend on it).
  EXPECT_EQ(team_of(*adaptive, 3 * starved), 2);
  for (int i = 0; i < cpu::WorkerStream::kSkipHalvingAfterNoGain; ++i)
    EXPECT_EQ(team_of(*adaptive, starved), 4) << i;

  // Then halving is tried again (the last full-team item was contended);
  // kernel building (Submit) keeps the full team meanwhile.
  EXPECT_EQ(team_of(*adaptive, milliseconds(0)), 2);
  int built_with = 0;
  adaptive->stream().Submit([&] { built_with = omp_get_max_threads(); });
  adaptive->stream().Synchronize();
  EXPECT_EQ(built_with, 4);

  auto fixed = cpu->CreateDevice(0, {4, 0, false});
  EXPECT_EQ(team_of(*fixed, starved), 4);
  EXPECT_EQ(team_of(*fixed, milliseconds(0)), 4);
}

// ---- placement and copies across two backends ------------------------------------

// x -> add(x, c) -> tanh -> transpose -> out: the test device runs add and
// transpose (it has no tanh), the CPU the rest.
std::unique_ptr<Graph> SplitGraph() {
  auto g = std::make_unique<Graph>();
  Value* x = g->AddInput("x", {DType::kF32, {3, 5}});
  Value* c = g->AddData("c", {DType::kF32, {5}}, ir::ValueKind::kConstant, Random({5}, 3));
  Value* t = g->Add1("tanh", {g->Add1("add", {x, c})});
  g->AddOutput("out", g->Add1("transpose", {t}, {{"perm", std::vector<int64_t>{1, 0}}}));
  return g;
}

std::vector<float> RunWith(compile::CompileOptions options, const AlignedBuffer& input,
                           int* copies = nullptr) {
  auto exe = compile::Executable::Build(SplitGraph(), options);
  if (copies) {
    *copies = 0;
    for (const auto& op : exe->graph().ops()) *copies += op->type == "copy";
  }
  std::memcpy(exe->inputs()[0].data, input.data(), input.size());
  exe->Run();
  const auto& out = exe->outputs()[0];
  const float* p = static_cast<const float*>(out.data);
  return {p, p + NumElements(out.type.shape)};
}

TEST(Placement, FirstSupportedSplitsAcrossBackendsWithCopiesAndMatchesCpuExactly) {
  LoadTestBackend();
  auto input = Random({3, 5}, 9);
  std::vector<float> cpu = RunWith(compile::CompileOptions::Cpu(1), *input);
  compile::CompileOptions split;
  split.devices = {{"test"}, {"cpu"}};
  split.placement = compile::PlacementPolicy::kFirstSupported;
  int copies = 0;
  std::vector<float> got = RunWith(split, *input, &copies);
  EXPECT_EQ(got, cpu);
  // x to test, add's result to cpu, tanh's result to test, the output back.
  EXPECT_EQ(copies, 4);
}

// A backend adds its own rewrites to the compile's pipeline
// (Backend::AddPasses) without touching the generic layers: the test
// backend's test_cancel_transposes runs where one of its devices is in the
// compile, after the generic rewrites, and not in a CPU-only compile.
TEST(BackendPasses, TheTestBackendsOwnRewriteRunsOnlyInCompilesWithItsDevices) {
  LoadTestBackend();
  auto build = [] {
    auto g = std::make_unique<Graph>();
    Value* x = g->AddInput("x", {DType::kF32, {3, 5}});
    Value* c = g->AddData("c", {DType::kF32, {3, 5}}, ir::ValueKind::kConstant, Random({3, 5}, 4));
    Value* t = g->Add1("transpose", {x}, {{"perm", std::vector<int64_t>{1, 0}}});
    Value* back = g->Add1("transpose", {t}, {{"perm", std::vector<int64_t>{1, 0}}});
    g->AddOutput("out", g->Add1("add", {back, c}));
    return g;
  };
  auto cpu_dev = backend::FindBackend("cpu")->CreateDevice(0, {});
  auto test_dev = backend::FindBackend("test")->CreateDevice(0, {});
  auto transposes = [](const Graph& g) {
    int n = 0;
    for (const auto& op : g.ops()) n += op->type == "transpose";
    return n;
  };
  compile::CompileOptions o;
  const passes::PassContext ctx = compile::PipelineContext({cpu_dev.get()}, false);
  {
    compile::CompiledStep step;
    auto p = compile::RewritePipeline(o, {cpu_dev.get()}, &step);
    auto names = p->PassNames();
    EXPECT_EQ(std::find(names.begin(), names.end(), "test_cancel_transposes"), names.end());
    auto g = build();
    p->RunRecorded(*g, ctx);
    EXPECT_EQ(transposes(*g), 2);
  }
  compile::CompiledStep step;
  auto p = compile::RewritePipeline(o, {test_dev.get(), cpu_dev.get()}, &step);
  auto names = p->PassNames();
  ASSERT_NE(std::find(names.begin(), names.end(), "test_cancel_transposes"), names.end());
  // After the generic rewrites; backends are asked in device order.
  EXPECT_GT(std::find(names.begin(), names.end(), "test_cancel_transposes"),
            std::find(names.begin(), names.end(), "half_fallback"));
  EXPECT_LT(std::find(names.begin(), names.end(), "test_cancel_transposes"),
            std::find(names.begin(), names.end(), "conv_winograd"));
  auto g = build();
  std::vector<passes::PassRecord> records = p->RunRecorded(*g, ctx);
  EXPECT_EQ(transposes(*g), 0);
  auto cancel = std::find_if(records.begin(), records.end(), [](const passes::PassRecord& r) {
    return r.name == "test_cancel_transposes";
  });
  ASSERT_NE(cancel, records.end());
  EXPECT_EQ(cancel->rewrites, 1);

  // The rewritten graph computes what the original does.
  auto input = Random({3, 5}, 9);
  auto run = [&input](std::unique_ptr<Graph> graph) {
    compile::CompileOptions split;
    split.devices = {{"test"}, {"cpu"}};
    split.placement = compile::PlacementPolicy::kFirstSupported;
    auto exe = compile::Executable::Build(std::move(graph), split);
    std::memcpy(exe->inputs()[0].data, input->data(), input->size());
    exe->Run();
    const float* out = static_cast<const float*>(exe->outputs()[0].data);
    return std::vector<float>(out, out + 15);
  };
  EXPECT_EQ(run(std::move(g)), run(build()));
}

// A device says how fast it multiplies each GEMM type (Device::GemmGflops),
// which the compiler and the runtime decide precision from: the CPU device
// measures a type exactly when its backend has a GEMM for it (bfloat16 only
// where that kernel is registered), once per thread count; a backend that
// measures nothing (the test backend) answers 0.
TEST(DeviceCaps, TheCpuDeviceMeasuresEachGemmTypeItMultipliesAndTheTestDeviceNone) {
  LoadTestBackend();
  backend::Backend* cpu = backend::FindBackend("cpu");
  auto dev = cpu->CreateDevice(0, {1, 0});
  const double f32 = dev->GemmGflops(DType::kF32);
  EXPECT_GT(f32, 0.5);
  for (DType t : {DType::kBF16, DType::kF16, DType::kI8})
    EXPECT_EQ(dev->GemmGflops(t) > 0, cpu->MultipliesIn(t)) << DTypeName(t);
  EXPECT_EQ(dev->GemmGflops(DType::kI64), 0.0);
  EXPECT_EQ(dev->GemmGflops(DType::kBool), 0.0);
  EXPECT_EQ(cpu->CreateDevice(1, {1, 0})->GemmGflops(DType::kF32), f32)
      << "measured once per thread count";
  auto test_dev = backend::FindBackend("test")->CreateDevice(0, {});
  for (DType t : {DType::kF32, DType::kBF16, DType::kI8}) EXPECT_EQ(test_dev->GemmGflops(t), 0.0);
}

TEST(Placement, VerifierRefusesACrossingWithoutCopy) {
  LoadTestBackend();
  auto g = SplitGraph();
  auto cpu_dev = backend::FindBackend("cpu")->CreateDevice(0, {});
  auto test_dev = backend::FindBackend("test")->CreateDevice(0, {});
  std::vector<backend::Device*> devices = {test_dev.get(), cpu_dev.get()};
  compile::PlaceOps(*g, devices, compile::PlacementPolicy::kFirstSupported);
  EXPECT_THROW(compile::VerifyPlacement(*g, 2, 1), Error);
  EXPECT_GT(compile::InsertCopies(*g, 1), 0);
  EXPECT_NO_THROW(compile::VerifyPlacement(*g, 2, 1));
  for (const auto& op : g->ops()) EXPECT_GE(op->device, 0) << op->name;
}

TEST(Placement, ShardsBeyondTheDevicesAndUnsupportedOpsAreRefused) {
  LoadTestBackend();
  auto cpu_dev = backend::FindBackend("cpu")->CreateDevice(0, {});
  auto test_dev = backend::FindBackend("test")->CreateDevice(0, {});
  {
    auto g = SplitGraph();
    for (const auto& op : g->ops()) op->placement.shard = 3;
    try {
      compile::PlaceOps(*g, {cpu_dev.get(), test_dev.get()}, compile::PlacementPolicy::kByShard);
      FAIL() << "shard 3 placed on 2 devices";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("shard 3"), std::string::npos) << e.what();
    }
  }
  {
    auto g = SplitGraph();
    try {
      // By shard, every op goes to device 0: the test device, which has no tanh.
      compile::PlaceOps(*g, {test_dev.get(), cpu_dev.get()}, compile::PlacementPolicy::kByShard);
      FAIL() << "tanh placed on the test device";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnimplemented);
      EXPECT_NE(std::string(e.what()).find("no test kernel for op tanh"), std::string::npos)
          << e.what();
    }
  }
}

TEST(Placement, OptionsWithoutAHostDeviceOrWithUnknownBackendsAreRefused) {
  LoadTestBackend();
  compile::CompileOptions only_test;
  only_test.devices = {{"test"}};
  EXPECT_THROW(compile::Compiler{only_test}, Error);
  compile::CompileOptions unknown;
  unknown.devices = {{"tpu"}};
  try {
    compile::Compiler c(unknown);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("no backend named 'tpu'"), std::string::npos);
  }
  compile::CompileOptions replicas;
  replicas.replicas = 4;
  try {
    compile::Compiler c(replicas);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("4 replicas need a replica group per device (0 for 1)"),
              std::string::npos)
        << e.what();
  }
  compile::CompileOptions scaled;
  scaled.loss_scale.scale = -2;
  try {
    compile::Compiler c(scaled);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("loss scaling must be a finite number > 0, got -2"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tiller
