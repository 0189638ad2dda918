// State values (training parameters, optimizer state): they live in storage
// the caller owns, keep their contents across runs, and take their updates
// in place when nothing reads the old value afterwards, else by a copy after
// the run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "compile/executable.h"
#include "compile/memory_plan.h"
#include "core/error.h"

namespace tiller::compile {
namespace {

using ir::Graph;
using ir::Value;

TEST(State, UpdateWrittenInPlaceWhenOldValueIsDead) {
  // s <- x + 1: the op producing the new value never reads s.
  auto g = std::make_unique<Graph>();
  Value* x = g->AddInput("x", {DType::kF32, {4}});
  Value* s = g->AddState("s", {DType::kF32, {4}});
  Value* y = g->Add1("mul", {x, s});
  Value* one = g->AddData("one", {DType::kF32, {}}, ir::ValueKind::kConstant, [] {
    auto b = std::make_shared<AlignedBuffer>(4);
    b->as<float>()[0] = 1.f;
    return b;
  }());
  Value* next = g->Add1("add", {x, one});
  g->SetStateUpdate(s, next);
  g->AddOutput("y", y);
  std::vector<float> storage{1, 2, 3, 4};
  auto exe = Executable::Build(std::move(g), {}, {{"s", storage.data()}});
  EXPECT_EQ(exe->plan().in_state.size(), 1u);
  EXPECT_TRUE(exe->plan().copy_back.empty());
  float xs[4] = {10, 20, 30, 40};
  std::memcpy(exe->inputs()[0].data, xs, sizeof(xs));
  exe->Run();
  const float* out = static_cast<const float*>(exe->outputs()[0].data);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(out[i], xs[i] * static_cast<float>(i + 1));  // read the old state
    EXPECT_EQ(storage[i], xs[i] + 1);                      // then replaced it
  }
}

TEST(State, UpdateCopiedWhenOldValueIsReadLater) {
  // s <- 2 s, but a later op still reads the old s: the new value must not
  // overwrite it before that op ran.
  auto g = std::make_unique<Graph>();
  Value* s = g->AddState("s", {DType::kF32, {3}});
  Value* doubled = g->Add1("scale", {s}, {{"scale", 2.0}, {"bias", 0.0}});
  Value* later = g->Add1("sub", {doubled, s});  // 2s - s = s (old s)
  g->SetStateUpdate(s, doubled);
  g->AddOutput("later", later);
  std::vector<float> storage{1, 2, 3};
  auto exe = Executable::Build(std::move(g), {}, {{"s", storage.data()}});
  EXPECT_TRUE(exe->plan().in_state.empty());
  ASSERT_EQ(exe->plan().copy_back.size(), 1u);
  for (int run = 1; run <= 3; ++run) {
    std::vector<float> before = storage;
    exe->Run();
    const float* out = static_cast<const float*>(exe->outputs()[0].data);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(out[i], before[i]) << "run " << run;
      EXPECT_EQ(storage[i], 2 * before[i]) << "run " << run;
    }
  }
}

TEST(State, LastReaderWritesInPlaceOnlyWhenItsKernelAllowsIt) {
  // scale is not declared inplace_safe, so s <- scale(s) is copied back even
  // though scale is the last op reading s.
  Graph g;
  Value* s = g.AddState("s", {DType::kF32, {8}});
  Value* next = g.Add1("scale", {s}, {{"scale", 0.5}, {"bias", 0.0}});
  g.SetStateUpdate(s, next);
  compile::MemoryPlan plan = compile::PlanMemory(g, std::vector<size_t>(g.ops().size(), 0));
  EXPECT_TRUE(plan.in_state.empty());
  EXPECT_EQ(plan.copy_back.size(), 1u);
  EXPECT_EQ(plan.offset.count(s), 0u) << "states never live in the arena";
}

TEST(State, MissingStorageIsAnError) {
  auto g = std::make_unique<Graph>();
  Value* s = g->AddState("s", {DType::kF32, {2}});
  g->AddOutput("y", g->Add1("relu", {s}));
  EXPECT_THROW(Executable::Build(std::move(g), {}, {}), Error);
}

TEST(State, UpdateMustKeepTheType) {
  Graph g;
  Value* s = g.AddState("s", {DType::kF32, {2}});
  Value* wrong = g.AddInput("w", {DType::kF32, {3}});
  EXPECT_THROW(g.SetStateUpdate(s, wrong), Error);
}

TEST(NanInfCheck, NamesTheFirstOpThatWentNonFinite) {
  auto g = std::make_unique<Graph>();
  Value* x = g->AddInput("x", {DType::kF32, {3}});
  Value* l = g->Add1("log", {x}, {}, "log (out: bad)");  // log(-1) = nan
  g->AddOutput("y", g->Add1("exp", {l}));
  auto exe = Executable::Build(std::move(g), {});
  float xs[3] = {1, -1, 2};
  std::memcpy(exe->inputs()[0].data, xs, sizeof(xs));
  exe->Run();  // off: runs through
  exe->EnableNanInfCheck(true);
  try {
    exe->Run();
    FAIL() << "expected a kNonFinite error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNonFinite);
    std::string msg = e.what();
    EXPECT_NE(msg.find("log (out: bad)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("element 1"), std::string::npos) << msg;
  }
}

TEST(NanInfCheck, GuardStopsBeforeLaterOpsRun) {
  // The guarded value goes non-finite; the state update after it must not happen.
  auto g = std::make_unique<Graph>();
  Value* x = g->AddInput("x", {DType::kF32, {2}});
  Value* s = g->AddState("s", {DType::kF32, {2}});
  Value* loss = g->Add1("log", {x});
  Value* next = g->Add1("add", {x, loss});
  g->SetStateUpdate(s, next);
  g->AddOutput("loss", loss);
  std::vector<float> storage{5, 6};
  auto exe = Executable::Build(std::move(g), {}, {{"s", storage.data()}});
  const Value* loss_value = exe->graph().outputs()[0].second;
  EXPECT_EQ(exe->GuardFinite(loss_value, "the loss"), 0);
  float xs[2] = {-1, 1};
  std::memcpy(exe->inputs()[0].data, xs, sizeof(xs));
  EXPECT_THROW(exe->Run(), Error);
  EXPECT_EQ(storage[0], 5);
  EXPECT_EQ(storage[1], 6);
}

}  // namespace
}  // namespace tiller::compile

namespace tiller::compile {
namespace {

// embedding_grad_add (the driver's fused gradient accumulation of an
// embedding table): acc + embedding_grad(ids, dy), written in place into the
// accumulator's storage, repeated ids summed, the padding row untouched;
// equal to embedding_grad followed by accumulate.
TEST(State, EmbeddingGradientScattersIntoItsAccumulatorInPlace) {
  constexpr int64_t kRows = 6, kDim = 3;
  const std::vector<int64_t> ids = {4, 1, 4, 0, 5};  // 4 twice; 5 is the padding row
  std::vector<float> dy(ids.size() * kDim);
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = 0.25f * static_cast<float>(i) - 1.f;
  std::vector<float> start(kRows * kDim);
  for (size_t i = 0; i < start.size(); ++i) start[i] = static_cast<float>(i % 5) + 0.5f;

  auto build = [&](bool fused) {
    auto g = std::make_unique<ir::Graph>();
    ir::Value* id = g->AddInput("ids", {DType::kI64, {static_cast<int64_t>(ids.size())}});
    ir::Value* d = g->AddInput("dy", {DType::kF32, {static_cast<int64_t>(ids.size()), kDim}});
    ir::Value* acc = g->AddState("acc", {DType::kF32, {kRows, kDim}});
    ir::Value* sum =
        fused
            ? g->Add1("embedding_grad_add", {acc, id, d}, {{"padding_idx", int64_t{5}}})
            : g->Add1("accumulate", {acc, g->Add1("embedding_grad", {id, d},
                                                  {{"rows", kRows}, {"padding_idx", int64_t{5}}})});
    g->SetStateUpdate(acc, sum);
    return g;
  };
  std::vector<float> fused = start, plain = start;
  auto a = Executable::Build(build(true), {}, {{"acc", fused.data()}});
  auto b = Executable::Build(build(false), {}, {{"acc", plain.data()}});
  EXPECT_EQ(a->plan().in_state.size(), 1u);  // straight into the accumulator
  for (Executable* exe : {a.get(), b.get()}) {
    std::memcpy(exe->inputs()[0].data, ids.data(), ids.size() * sizeof(int64_t));
    std::memcpy(exe->inputs()[1].data, dy.data(), dy.size() * sizeof(float));
    exe->Run();
    exe->Run();  // twice: a second micro-batch adds on top
  }
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t j = 0; j < kDim; ++j) {
      const size_t e = static_cast<size_t>(r * kDim + j);
      float want = start[e];
      for (int run = 0; run < 2; ++run) {
        for (size_t i = 0; i < ids.size(); ++i) {
          if (ids[i] == r && r != 5) want += dy[i * kDim + j];
        }
      }
      EXPECT_NEAR(fused[e], want, 1e-6f) << "row " << r << " col " << j;
      EXPECT_NEAR(plain[e], want, 1e-6f) << "row " << r << " col " << j;
    }
  }
  EXPECT_EQ(fused[5 * kDim], start[5 * kDim]);  // the padding row
}

// matmul_accumulate (the driver's fused accumulation of a weight gradient a
// matmul computes): acc + op(a) op(b), the GEMM adding into the
// accumulator's storage in place, for every transpose combination; equal to
// matmul followed by accumulate within float32 rounding of the sums (the
// same products, added in another order: 1e-5 relative).
TEST(State, MatmulGradientAddsIntoItsAccumulatorInPlace) {
  constexpr int64_t kM = 5, kK = 7, kN = 3;
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    std::vector<float> a(kM * kK), b(kK * kN), start(kM * kN);
    for (size_t i = 0; i < a.size(); ++i) a[i] = 0.1f * static_cast<float>(i % 11) - 0.4f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = 0.3f - 0.05f * static_cast<float>(i % 13);
    for (size_t i = 0; i < start.size(); ++i) start[i] = static_cast<float>(i % 4) - 1.5f;
    auto build = [&](bool fused) {
      auto g = std::make_unique<ir::Graph>();
      ir::Value* av = g->AddInput("a", {DType::kF32, ta ? Shape{kK, kM} : Shape{kM, kK}});
      ir::Value* bv = g->AddInput("b", {DType::kF32, tb ? Shape{kN, kK} : Shape{kK, kN}});
      ir::Value* acc = g->AddState("acc", {DType::kF32, {kM, kN}});
      ir::AttrMap attrs = {{"transpose_a", ta}, {"transpose_b", tb}, {"alpha", 0.5}};
      ir::Value* sum = fused ? g->Add1("matmul_accumulate", {acc, av, bv}, attrs)
                             : g->Add1("accumulate", {acc, g->Add1("matmul", {av, bv}, attrs)});
      g->SetStateUpdate(acc, sum);
      return g;
    };
    std::vector<float> fused = start, plain = start;
    auto x = Executable::Build(build(true), {}, {{"acc", fused.data()}});
    auto y = Executable::Build(build(false), {}, {{"acc", plain.data()}});
    EXPECT_EQ(x->plan().in_state.size(), 1u);  // written in place
    for (Executable* exe : {x.get(), y.get()}) {
      // a and b hold the same numbers whatever their layout: only the
      // product's meaning changes with the transposes.
      std::memcpy(exe->inputs()[0].data, a.data(), a.size() * sizeof(float));
      std::memcpy(exe->inputs()[1].data, b.data(), b.size() * sizeof(float));
      exe->Run();
      exe->Run();
    }
    for (int64_t i = 0; i < kM; ++i) {
      for (int64_t j = 0; j < kN; ++j) {
        double dot = 0;
        for (int64_t k = 0; k < kK; ++k)
          dot += static_cast<double>(ta ? a[k * kM + i] : a[i * kK + k]) *
                 (tb ? b[j * kK + k] : b[k * kN + j]);
        const size_t e = static_cast<size_t>(i * kN + j);
        const double want = start[e] + 2 * 0.5 * dot;
        EXPECT_NEAR(fused[e], want, 1e-5 * (1 + std::abs(want))) << t << " " << i << "," << j;
        EXPECT_NEAR(plain[e], fused[e], 1e-5 * (1 + std::abs(want))) << t << " " << i << "," << j;
      }
    }
  }
}

// When the accumulator is read after the update (by a later op), the
// product goes to a value of its own, the accumulator copied in first.
TEST(State, MatmulAccumulateOutOfPlaceCopiesTheAccumulatorFirst) {
  auto g = std::make_unique<ir::Graph>();
  ir::Value* a = g->AddInput("a", {DType::kF32, {1, 2}});
  ir::Value* b = g->AddInput("b", {DType::kF32, {2, 2}});
  ir::Value* acc = g->AddState("acc", {DType::kF32, {1, 2}});
  g->SetStateUpdate(acc, g->Add1("matmul_accumulate", {acc, a, b}));
  g->AddOutput("before", g->Add1("scale", {acc}, {{"scale", 1.0}, {"bias", 0.0}}));
  std::vector<float> storage = {10.f, 20.f};
  auto exe = Executable::Build(std::move(g), {}, {{"acc", storage.data()}});
  EXPECT_EQ(exe->plan().in_state.size(), 0u);
  const float av[2] = {1.f, 2.f}, bv[4] = {1.f, 2.f, 3.f, 4.f};
  std::memcpy(exe->inputs()[0].data, av, sizeof(av));
  std::memcpy(exe->inputs()[1].data, bv, sizeof(bv));
  exe->Run();
  const float* before = static_cast<const float*>(exe->outputs()[0].data);
  EXPECT_EQ(before[0], 10.f);
  EXPECT_EQ(before[1], 20.f);
  EXPECT_EQ(storage, (std::vector<float>{17.f, 30.f}));
}

// A tied embedding's gradient on one device: the lookup's scatter and the
// output projection's matmul add into the accumulator one after the other;
// the memory plan keeps the whole chain in the accumulator's storage (no
// table-sized value in the arena).
TEST(State, AChainOfInPlaceAccumulationsStaysInTheAccumulatorsStorage) {
  constexpr int64_t kRows = 6, kDim = 4, kTokens = 3;
  auto g = std::make_unique<ir::Graph>();
  ir::Value* id = g->AddInput("ids", {DType::kI64, {kTokens}});
  ir::Value* d = g->AddInput("dy", {DType::kF32, {kTokens, kDim}});
  ir::Value* a = g->AddInput("a", {DType::kF32, {kTokens, kRows}});
  ir::Value* acc = g->AddState("acc", {DType::kF32, {kRows, kDim}});
  ir::Value* scattered = g->Add1("embedding_grad_add", {acc, id, d});
  ir::Value* sum = g->Add1("matmul_accumulate", {scattered, a, d}, {{"transpose_a", true}});
  g->SetStateUpdate(acc, sum);
  std::vector<float> table(kRows * kDim, 1.0f);
  auto exe = Executable::Build(std::move(g), {}, {{"acc", table.data()}});
  EXPECT_EQ(exe->plan().in_state.size(), 2u);
  EXPECT_EQ(exe->plan().copy_back.size(), 0u);
  const std::vector<int64_t> ids = {2, 0, 2};
  std::vector<float> dy(kTokens * kDim), av(kTokens * kRows);
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = 0.5f * static_cast<float>(i) - 2.f;
  for (size_t i = 0; i < av.size(); ++i) av[i] = 0.25f * static_cast<float>(i % 5) - 0.5f;
  std::memcpy(exe->inputs()[0].data, ids.data(), ids.size() * sizeof(int64_t));
  std::memcpy(exe->inputs()[1].data, dy.data(), dy.size() * sizeof(float));
  std::memcpy(exe->inputs()[2].data, av.data(), av.size() * sizeof(float));
  exe->Run();
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t j = 0; j < kDim; ++j) {
      double want = 1.0;
      for (int64_t t = 0; t < kTokens; ++t) {
        if (ids[t] == r) want += dy[t * kDim + j];
        want += static_cast<double>(av[t * kRows + r]) * dy[t * kDim + j];
      }
      EXPECT_NEAR(table[r * kDim + j], want, 1e-5) << r << "," << j;
    }
  }
}

}  // namespace
}  // namespace tiller::compile
