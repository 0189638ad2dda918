// Pipeline stages on different processes (compile/processes.h), without
// MPI: the "processes" are two threads of this test, linked by a mailbox
// that implements backend::ProcessGroup's point to point. The job's split
// steps must compute what one process running both devices computes.
#include "compile/processes.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <tuple>

#include "backend/backend.h"
#include "backend/collective.h"
#include "compile/executable.h"
#include "compile/pipeline.h"
#include "compile/placement.h"
#include "core/error.h"

namespace tiller {
namespace {

using ir::Graph;
using ir::Value;

// Messages between the test's two "processes".
struct Mailbox {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::tuple<int, int, int64_t>, std::deque<std::vector<std::byte>>> queues;
  int sends = 0;
};

class LoopbackLink : public backend::ProcessGroup {
 public:
  LoopbackLink(Mailbox& box, int rank) : box_(box), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  void Broadcast(int, void*, size_t) override { Fail(ErrorKind::kUnimplemented, "broadcast"); }
  int Min(int) override { Fail(ErrorKind::kUnimplemented, "min"); }
  void GatherParts(void*, int64_t, size_t, int) override {
    Fail(ErrorKind::kUnimplemented, "gather");
  }
  std::unique_ptr<backend::Collective> MakeCollective(int) override {
    Fail(ErrorKind::kUnimplemented, "collective");
  }
  std::unique_ptr<backend::Collective> MakeCollectiveOf(int) override {
    Fail(ErrorKind::kUnimplemented, "collective");
  }
  void Send(int to, int64_t tag, const void* data, size_t bytes) override {
    std::vector<std::byte> copy(bytes);
    std::memcpy(copy.data(), data, bytes);
    std::lock_guard<std::mutex> lock(box_.mu);
    box_.queues[{rank_, to, tag}].push_back(std::move(copy));
    ++box_.sends;
    box_.cv.notify_all();
  }
  bool Arrived(int from, int64_t tag) override {
    std::lock_guard<std::mutex> lock(box_.mu);
    auto it = box_.queues.find({from, rank_, tag});
    return it != box_.queues.end() && !it->second.empty();
  }
  void Recv(int from, int64_t tag, void* data, size_t bytes) override {
    std::unique_lock<std::mutex> lock(box_.mu);
    auto& q = box_.queues[{from, rank_, tag}];
    if (!box_.cv.wait_for(lock, std::chrono::seconds(20), [&] { return !q.empty(); }))
      AbortJob(fmt::format("no message from {} tag {}", from, tag));
    EXPECT_EQ(q.front().size(), bytes);
    std::memcpy(data, q.front().data(), std::min(bytes, q.front().size()));
    q.pop_front();
  }
  double timeout_seconds() const override { return 20; }
  [[noreturn]] void AbortJob(const std::string& why) override {
    Fail(ErrorKind::kInternal, "rank {}: {}", rank_, why);
  }

 private:
  Mailbox& box_;
  int rank_;
};

std::shared_ptr<AlignedBuffer> Random(const Shape& shape, uint32_t seed) {
  auto b = std::make_shared<AlignedBuffer>(static_cast<size_t>(NumElements(shape)) * 4);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < NumElements(shape); ++i) b->as<float>()[i] = u(rng);
  return b;
}

// Device 0: a = tanh(x + c0), the output "a_sum" = sum(a), and the state s
// updated to s + c1. Device 1 reads a (a message) and s: y = tanh(a * s).
// With `state` off, no state (a pipeline's micro-batches would race on it).
std::unique_ptr<Graph> TwoStages(bool state) {
  auto g = std::make_unique<Graph>();
  Value* x = g->AddInput("x", {DType::kF32, {4, 6}});
  Value* s = state ? g->AddState("s", {DType::kF32, {6}}) : nullptr;
  Value* a;
  {
    ir::ScopedPlacement on(*g, {0, 0, ir::Phase::kForward});
    Value* c0 = g->AddData("c0", {DType::kF32, {6}}, ir::ValueKind::kConstant, Random({6}, 1));
    a = g->Add1("tanh", {g->Add1("add", {x, c0})});
    g->AddOutput("a_sum", g->Add1("reduce_sum", {a}, {{"axes", std::vector<int64_t>{}}}));
    if (state) {
      Value* c1 = g->AddData("c1", {DType::kF32, {6}}, ir::ValueKind::kConstant, Random({6}, 2));
      g->SetStateUpdate(s, g->Add1("add", {s, c1}));
    }
  }
  ir::ScopedPlacement on(*g, {1, 1, ir::Phase::kForward});
  Value* c2 = g->AddData("c2", {DType::kF32, {6}}, ir::ValueKind::kConstant, Random({6}, 3));
  g->AddOutput("y", g->Add1("tanh", {g->Add1("mul", {a, state ? s : c2})}));
  return g;
}

struct Job {
  std::vector<std::unique_ptr<backend::Device>> owned;
  std::vector<backend::Device*> devices;
  std::unique_ptr<compile::Executable> exe;
  compile::ProcessSplit split;
};

// Process `me`'s step (both devices exist: the other's is its placeholder).
Job Compile(bool state, int me, LoopbackLink* link, const compile::StateStorage& states) {
  Job job;
  backend::Backend* cpu = backend::FindBackend("cpu");
  for (int d = 0; d < 2; ++d) {
    job.owned.push_back(cpu->CreateDevice(d, {1, 0}));
    job.devices.push_back(job.owned.back().get());
  }
  auto g = TwoStages(state);
  compile::PlaceOps(*g, job.devices, compile::PlacementPolicy::kByShard);
  const int host = compile::HostDevice(job.devices);
  compile::InsertCopies(*g, host, compile::HostMemoryDevices(job.devices));
  compile::OrderByDevice(*g);
  if (link) job.split = compile::SplitAcrossProcesses(*g, {0, 1}, me, host);
  job.exe = compile::Executable::BuildPlaced(std::move(g), job.devices, states);
  if (link) {
    job.exe->SetProcessLink(link);
    job.exe->SetLenders({me == 0, me == 1});
  }
  return job;
}

std::vector<float> Output(const compile::Executable& exe, const std::string& name) {
  for (const compile::TensorSlot& slot : exe.outputs()) {
    if (slot.name != name) continue;
    const float* p = static_cast<const float*>(slot.data);
    return {p, p + NumElements(slot.type.shape)};
  }
  ADD_FAILURE() << "no output " << name;
  return {};
}

TEST(Processes, SplitStepsComputeWhatOneProcessComputes) {
  auto x = Random({4, 6}, 7);
  auto s0 = Random({6}, 8);
  // One process with both devices.
  AlignedBuffer s_ref(24);
  std::memcpy(s_ref.data(), s0->data(), 24);
  Job ref = Compile(true, 0, nullptr, {{"s", s_ref.data()}});
  std::memcpy(ref.exe->inputs()[0].data, x->data(), x->size());
  ref.exe->Run();

  Mailbox box;
  LoopbackLink links[2] = {{box, 0}, {box, 1}};
  AlignedBuffer s[2] = {AlignedBuffer(24), AlignedBuffer(24)};
  Job jobs[2];
  for (int p = 0; p < 2; ++p) {
    std::memcpy(s[p].data(), s0->data(), 24);
    jobs[p] = Compile(true, p, &links[p], {{"s", s[p].data()}});
    std::memcpy(jobs[p].exe->inputs()[0].data, x->data(), x->size());
  }
  // a to device 1, y to process 0, a_sum to process 1, s's update to the
  // process reading it: numbered alike on both.
  for (const Job& j : jobs) EXPECT_EQ(j.split.transfers, 4);
  EXPECT_EQ(jobs[0].split.sends, 3);
  EXPECT_EQ(jobs[0].split.recvs, 1);
  EXPECT_EQ(jobs[1].split.sends, 1);
  EXPECT_EQ(jobs[1].split.recvs, 3);
  EXPECT_EQ(jobs[0].split.state_owner, (std::map<std::string, int>{{"s", 0}}));
  for (const Job& j : jobs) {
    for (const auto& op : j.exe->graph().ops()) {
      if (op->type != "send" && op->type != "recv") {
        EXPECT_EQ(op->device, &j - jobs) << op->type;
      }
    }
  }
  std::thread other([&] { jobs[1].exe->Run(); });
  jobs[0].exe->Run();
  other.join();
  for (int p = 0; p < 2; ++p) {
    EXPECT_EQ(Output(*jobs[p].exe, "y"), Output(*ref.exe, "y")) << "process " << p;
    EXPECT_EQ(Output(*jobs[p].exe, "a_sum"), Output(*ref.exe, "a_sum")) << "process " << p;
    EXPECT_EQ(std::memcmp(s[p].data(), s_ref.data(), 24), 0) << "process " << p;
  }
  EXPECT_EQ(box.sends, 4);
}

// The two processes' pipelines run 6 micro-batches on 2 copies each: the
// receiving segments wait for their messages (tagged by micro-batch), and
// every micro-batch's outputs equal the one-process run's.
TEST(Processes, PipelinesOnTwoProcessesMatchTheOneProcessRun) {
  constexpr int kMicro = 6;
  std::vector<std::shared_ptr<AlignedBuffer>> xs;
  for (int i = 0; i < kMicro; ++i) xs.push_back(Random({4, 6}, 100 + i));
  Job ref = Compile(false, 0, nullptr, {});
  std::vector<std::vector<float>> want;
  for (int i = 0; i < kMicro; ++i) {
    std::memcpy(ref.exe->inputs()[0].data, xs[i]->data(), xs[i]->size());
    ref.exe->Run();
    want.push_back(Output(*ref.exe, "y"));
  }

  Mailbox box;
  LoopbackLink links[2] = {{box, 0}, {box, 1}};
  Job jobs[2][2];
  std::vector<std::vector<float>> got[2];
  auto run = [&](int p) {
    std::vector<compile::Executable*> copies;
    for (int c = 0; c < 2; ++c) {
      jobs[p][c] = Compile(false, p, &links[p], {});
      copies.push_back(jobs[p][c].exe.get());
    }
    // Each process's runner drives its own devices (the placeholder has
    // no segments).
    compile::PipelineRunner runner(copies, jobs[p][0].devices,
                                   compile::PipelineSchedule::kOneForwardOneBackward);
    got[p].resize(kMicro);
    runner.Run(
        kMicro,
        [&](int i, compile::Executable& exe) {
          std::memcpy(exe.inputs()[0].data, xs[i]->data(), xs[i]->size());
        },
        [&](int i, compile::Executable& exe) { got[p][i] = Output(exe, "y"); });
  };
  std::thread other(run, 1);
  run(0);
  other.join();
  for (int p = 0; p < 2; ++p) {
    for (int i = 0; i < kMicro; ++i)
      EXPECT_EQ(got[p][i], want[i]) << "process " << p << " micro-batch " << i;
  }
}

// A value crossing processes in the update of a state another process
// reads, and a fetch of a state another process updates, are named.
TEST(Processes, AFetchOfAStateAnotherProcessUpdatesIsRefused) {
  auto g = std::make_unique<Graph>();
  Value* s = g->AddState("s", {DType::kF32, {6}});
  {
    ir::ScopedPlacement on(*g, {1, 0, ir::Phase::kForward});
    g->SetStateUpdate(s, g->Add1("tanh", {s}));
  }
  g->AddOutput("s_fetched", s);
  backend::Backend* cpu = backend::FindBackend("cpu");
  auto d0 = cpu->CreateDevice(0, {1, 0}), d1 = cpu->CreateDevice(1, {1, 0});
  std::vector<backend::Device*> devices = {d0.get(), d1.get()};
  compile::PlaceOps(*g, devices, compile::PlacementPolicy::kByShard);
  compile::InsertCopies(*g, 0, compile::HostMemoryDevices(devices));
  try {
    compile::SplitAcrossProcesses(*g, {0, 1}, 0, 0);
    FAIL() << "expected kUnimplemented";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnimplemented);
    EXPECT_NE(std::string(e.what()).find("s_fetched"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tiller
