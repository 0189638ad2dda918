// The public inference API (tiller/predictor.h) end to end: a small legacy
// Paddle program and its combined parameter file are written here, loaded
// through Config/CreatePredictor, run, and checked against double-precision
// references computed in this file from the same weights. Then the error
// paths a user can hit, each checked for its ErrorKind and for a message
// that names the file, tensor or op involved.
//
// Program bytes come from a small protobuf wire encoder (field numbers from
// src/frontend/paddle/framework.proto and docs/PADDLE_FORMATS.md), so the
// test needs neither Python nor libprotobuf at run time.
#include "tiller/predictor.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "paddle_wire.h"

namespace tiller::inference {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

using namespace ::tiller::paddle_wire;  // NOLINT: test helpers
using ::tiller::paddle_wire::Slot;      // not paddle::Slot, the program type

Pb IntAttr(const std::string& name, int64_t v) {
  return Pb().Bytes(1, name).Int(2, aInt).Int(3, v);
}
Pb IntsAttr(const std::string& name, const std::vector<int64_t>& v) {
  Pb a;
  a.Bytes(1, name).Int(2, aInts);
  for (int64_t x : v) a.Int(6, x);
  return a;
}
Pb BoolAttr(const std::string& name, bool v) {
  return Pb().Bytes(1, name).Int(2, aBoolean).Int(10, v);
}
Pb StringAttr(const std::string& name, const std::string& v) {
  return Pb().Bytes(1, name).Int(2, aString).Bytes(5, v);
}

Pb Op(const std::string& type, const std::vector<Pb>& ins, const std::vector<Pb>& outs,
      std::vector<Pb> attrs = {}) {
  // Exported ops carry these bookkeeping attributes; the reader must
  // tolerate them.
  attrs.push_back(IntAttr("op_role", 0));
  attrs.push_back(StringAttr("op_device", ""));
  Pb op;
  op.Bytes(3, type);
  for (const auto& i : ins) op.Msg(1, i);
  for (const auto& o : outs) op.Msg(2, o);
  for (const auto& a : attrs) op.Msg(4, a);
  return op;
}

Pb Feed(const std::string& var, int col) {
  return Op("feed", {Slot("X", {"feed"})}, {Slot("Out", {var})}, {IntAttr("col", col)});
}
Pb Fetch(const std::string& var, int col) {
  return Op("fetch", {Slot("X", {var})}, {Slot("Out", {"fetch"})}, {IntAttr("col", col)});
}

// A ProgramDesc with one block (idx 0, parent -1) and version 3.3.1.
std::string ProgramBytes(const std::vector<Pb>& vars, const std::vector<Pb>& ops) {
  Pb block;
  block.Int(1, 0).Int(2, -1);
  for (const auto& v : vars) block.Msg(3, v);
  for (const auto& o : ops) block.Msg(4, o);
  return Pb().Msg(1, block).Msg(4, Pb().Int(1, 3003001)).str();
}

// ---- Tensor records -------------------------------------------------------

// One .pdiparams record: version, no LoD, tensor version, TensorDesc, data.
template <typename T>
std::string Record(int dtype, const std::vector<int64_t>& dims, const std::vector<T>& data) {
  std::string r;
  Put<uint32_t>(r, 0);
  Put<uint64_t>(r, 0);
  Put<uint32_t>(r, 0);
  std::string desc = TensorDesc(dtype, dims).str();
  Put<int32_t>(r, static_cast<int32_t>(desc.size()));
  r += desc;
  r.append(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(T));
  return r;
}

// ---- The model --------------------------------------------------------------

constexpr int64_t kIn = 8, kHidden = 16, kClasses = 4, kVocab = 10, kSeq = 5;

std::vector<float> RandomFloats(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<int64_t> RandomIds(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int64_t> d(0, kVocab - 1);
  std::vector<int64_t> v(n);
  for (int64_t& x : v) x = d(rng);
  return v;
}

struct Weights {
  std::vector<float> w1, b1, w2, emb;  // [8,16], [16], [16,4], [10,4]
};

Weights RandomWeights(std::mt19937& rng) {
  Weights w;
  w.w1 = RandomFloats(rng, kIn * kHidden);
  w.b1 = RandomFloats(rng, kHidden);
  w.w2 = RandomFloats(rng, kHidden * kClasses);
  w.emb = RandomFloats(rng, kVocab * kClasses);
  return w;
}

// x[-1,8] -> matmul_v2(fc1.w) -> elementwise_add(fc1.b) -> relu
//   -> matmul_v2(fc2.w) -> softmax -> fetch col 0 ("prob");
// ids[-1,5] -> lookup_table_v2(emb.w) -> reduce_mean(dim 1) -> + prob
//   -> fetch col 1 ("mixed").
// The feed ops are written in reverse col order, as jit.save does, so the
// input order must come from `col`, not from op order.
std::string MlpProgram() {
  std::vector<Pb> vars = {
      ListVar("feed", kFeed),
      ListVar("fetch", kFetch),
      Var("x", kF32, {-1, kIn}),
      Var("ids", kI64, {-1, kSeq}),
      Var("fc1.w", kF32, {kIn, kHidden}, true),
      Var("fc1.b", kF32, {kHidden}, true),
      Var("fc2.w", kF32, {kHidden, kClasses}, true),
      Var("emb.w", kF32, {kVocab, kClasses}, true),
      Var("fc1.tmp_0", kF32, {-1, kHidden}),
      Var("fc1.tmp_1", kF32, {-1, kHidden}),
      Var("relu.tmp_0", kF32, {-1, kHidden}),
      Var("fc2.tmp_0", kF32, {-1, kClasses}),
      Var("prob", kF32, {-1, kClasses}),
      Var("emb.tmp_0", kF32, {-1, kSeq, kClasses}),
      Var("emb_mean", kF32, {-1, kClasses}),
      Var("mixed", kF32, {-1, kClasses}),
  };
  std::vector<Pb> ops = {
      Feed("ids", 1),
      Feed("x", 0),
      Op("matmul_v2", {Slot("X", {"x"}), Slot("Y", {"fc1.w"})}, {Slot("Out", {"fc1.tmp_0"})},
         {BoolAttr("trans_x", false), BoolAttr("trans_y", false)}),
      Op("elementwise_add", {Slot("X", {"fc1.tmp_0"}), Slot("Y", {"fc1.b"})},
         {Slot("Out", {"fc1.tmp_1"})}, {IntAttr("axis", -1)}),
      Op("relu", {Slot("X", {"fc1.tmp_1"})}, {Slot("Out", {"relu.tmp_0"})}),
      Op("matmul_v2", {Slot("X", {"relu.tmp_0"}), Slot("Y", {"fc2.w"})},
         {Slot("Out", {"fc2.tmp_0"})}, {BoolAttr("trans_x", false), BoolAttr("trans_y", false)}),
      Op("softmax", {Slot("X", {"fc2.tmp_0"})}, {Slot("Out", {"prob"})}, {IntAttr("axis", -1)}),
      Op("lookup_table_v2", {Slot("Ids", {"ids"}), Slot("W", {"emb.w"})},
         {Slot("Out", {"emb.tmp_0"})}, {IntAttr("padding_idx", -1)}),
      Op("reduce_mean", {Slot("X", {"emb.tmp_0"})}, {Slot("Out", {"emb_mean"})},
         {IntsAttr("dim", {1}), BoolAttr("keep_dim", false), BoolAttr("reduce_all", false)}),
      Op("elementwise_add", {Slot("X", {"prob"}), Slot("Y", {"emb_mean"})},
         {Slot("Out", {"mixed"})}, {IntAttr("axis", -1)}),
      Fetch("prob", 0),
      Fetch("mixed", 1),
  };
  return ProgramBytes(vars, ops);
}

// Records in sorted variable-name order, as a combined .pdiparams holds them.
std::string MlpParams(const Weights& w) {
  std::map<std::string, std::string> records = {
      {"fc1.w", Record(kF32, {kIn, kHidden}, w.w1)},
      {"fc1.b", Record(kF32, {kHidden}, w.b1)},
      {"fc2.w", Record(kF32, {kHidden, kClasses}, w.w2)},
      {"emb.w", Record(kF32, {kVocab, kClasses}, w.emb)},
  };
  std::string out;
  for (const auto& [name, record] : records) out += record;
  return out;
}

struct Outputs {
  std::vector<double> prob, mixed;  // [batch, 4] each
};

// The model in plain double-precision loops.
Outputs Reference(const Weights& w, const std::vector<float>& x, const std::vector<int64_t>& ids,
                  int64_t batch) {
  Outputs o;
  o.prob.resize(batch * kClasses);
  o.mixed.resize(batch * kClasses);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<double> h(kHidden);
    for (int64_t j = 0; j < kHidden; ++j) {
      double acc = w.b1[j];
      for (int64_t k = 0; k < kIn; ++k) acc += double{x[b * kIn + k]} * w.w1[k * kHidden + j];
      h[j] = std::max(acc, 0.0);
    }
    std::vector<double> logits(kClasses);
    for (int64_t c = 0; c < kClasses; ++c) {
      double acc = 0;
      for (int64_t j = 0; j < kHidden; ++j) acc += h[j] * w.w2[j * kClasses + c];
      logits[c] = acc;
    }
    double mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (double l : logits) sum += std::exp(l - mx);
    for (int64_t c = 0; c < kClasses; ++c) {
      double p = std::exp(logits[c] - mx) / sum;
      double mean = 0;
      for (int64_t s = 0; s < kSeq; ++s) mean += w.emb[ids[b * kSeq + s] * kClasses + c];
      mean /= kSeq;
      o.prob[b * kClasses + c] = p;
      o.mixed[b * kClasses + c] = p + mean;
    }
  }
  return o;
}

// ---- Fixture ------------------------------------------------------------------

class PredictorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           fmt::format("tiller_predictor_{}_{}", getpid(), info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    weights_ = RandomWeights(rng_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& bytes) {
    return WriteFile(dir_, name, bytes);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes <name>/model.pdmodel and <name>/model.pdiparams; returns the dir.
  std::string WriteMlp(const std::string& name) {
    Write(name + "/model.pdmodel", MlpProgram());
    Write(name + "/model.pdiparams", MlpParams(weights_));
    return Path(name);
  }

  // Feeds random inputs of `batch` rows, runs, and checks both outputs
  // (shape, dtype, values) against Reference.
  void RunAndCheck(Predictor& predictor, int64_t batch) {
    SCOPED_TRACE(fmt::format("batch {}", batch));
    std::vector<float> x = RandomFloats(rng_, batch * kIn);
    std::vector<int64_t> ids = RandomIds(rng_, batch * kSeq);
    auto x_in = predictor.GetInputHandle("x");
    x_in->Reshape({batch, kIn});
    x_in->CopyFromCpu(x.data());
    auto ids_in = predictor.GetInputHandle("ids");
    ids_in->Reshape({batch, kSeq});
    ids_in->CopyFromCpu(ids.data());
    ASSERT_TRUE(predictor.Run());

    Outputs want = Reference(weights_, x, ids, batch);
    const std::vector<double>* wants[] = {&want.prob, &want.mixed};
    std::vector<std::string> names = predictor.GetOutputNames();
    ASSERT_EQ(names.size(), 2u);
    for (size_t i = 0; i < names.size(); ++i) {
      auto out = predictor.GetOutputHandle(names[i]);
      EXPECT_EQ(out->name(), names[i]);
      EXPECT_EQ(out->shape(), (std::vector<int64_t>{batch, kClasses})) << names[i];
      EXPECT_EQ(out->type(), DataType::FLOAT32) << names[i];
      ASSERT_EQ(out->numel(), batch * kClasses) << names[i];
      std::vector<float> got(out->numel());
      out->CopyToCpu(got.data());
      for (size_t k = 0; k < got.size(); ++k) {
        EXPECT_NEAR(got[k], (*wants[i])[k], 1e-5) << names[i] << "[" << k << "]";
      }
    }
  }

  fs::path dir_;
  std::mt19937 rng_{20240611};
  Weights weights_;
};

// Runs `fn`, expecting a tiller::Error of `kind` whose message contains
// every string in `parts` (and none in `absent`).
void ExpectError(const std::function<void()>& fn, ErrorKind kind,
                 const std::vector<std::string>& parts,
                 const std::vector<std::string>& absent = {}) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << ErrorKindName(e.kind()) << ": " << e.what();
    for (const auto& p : parts) EXPECT_THAT(e.what(), HasSubstr(p));
    for (const auto& p : absent) EXPECT_THAT(e.what(), Not(HasSubstr(p)));
  }
}

// ---- Results ----------------------------------------------------------------

TEST_F(PredictorTest, NamesShapesAndTypes) {
  std::string dir = WriteMlp("m");
  auto predictor = CreatePredictor(Config(dir + "/model.pdmodel", dir + "/model.pdiparams"));
  // Inputs in feed `col` order although the feed ops are in reverse order;
  // outputs in fetch `col` order.
  EXPECT_EQ(predictor->GetInputNames(), (std::vector<std::string>{"x", "ids"}));
  EXPECT_EQ(predictor->GetOutputNames(), (std::vector<std::string>{"prob", "mixed"}));
  EXPECT_EQ(predictor->GetInputShape("x"), (std::vector<int64_t>{-1, kIn}));
  EXPECT_EQ(predictor->GetInputShape("ids"), (std::vector<int64_t>{-1, kSeq}));
  EXPECT_EQ(predictor->GetInputType("x"), DataType::FLOAT32);
  EXPECT_EQ(predictor->GetInputType("ids"), DataType::INT64);
  auto ids = predictor->GetInputHandle("ids");
  EXPECT_EQ(ids->name(), "ids");
  EXPECT_EQ(ids->type(), DataType::INT64);
  ids->Reshape({3, kSeq});
  EXPECT_EQ(ids->shape(), (std::vector<int64_t>{3, kSeq}));
  EXPECT_EQ(ids->numel(), 3 * kSeq);
}

TEST_F(PredictorTest, MatchesReference) {
  std::string dir = WriteMlp("m");
  auto predictor = CreatePredictor(Config(dir + "/model.pdmodel", dir + "/model.pdiparams"));
  RunAndCheck(*predictor, 3);
}

TEST_F(PredictorTest, BatchSizeChangesRecompileAndReuse) {
  std::string dir = WriteMlp("m");
  auto predictor = CreatePredictor(Config(dir + "/model.pdmodel", dir + "/model.pdiparams"));
  // 3 compiles, 7 compiles a second executable, 3 again must reuse the
  // first one and still see the new input data, and 1 covers a single row.
  for (int64_t batch : {3, 7, 3, 1, 7}) RunAndCheck(*predictor, batch);
}

TEST_F(PredictorTest, RepeatedRunsWithSameShapeSeeNewData) {
  std::string dir = WriteMlp("m");
  auto predictor = CreatePredictor(Config(dir + "/model.pdmodel", dir + "/model.pdiparams"));
  // Same shape each time, so only the cached executable is used; stale
  // inputs or outputs from the previous run would show up here.
  for (int i = 0; i < 3; ++i) RunAndCheck(*predictor, 4);
}

TEST_F(PredictorTest, TwoThreadsMatchReference) {
  std::string dir = WriteMlp("m");
  Config config(dir + "/model.pdmodel", dir + "/model.pdiparams");
  config.SetCpuMathLibraryNumThreads(2);
  EXPECT_EQ(config.cpu_math_library_num_threads(), 2);
  auto predictor = CreatePredictor(config);
  // A batch large enough that work is split between threads.
  RunAndCheck(*predictor, 64);
  RunAndCheck(*predictor, 5);
}

// Predictor::Clone and services::PredictorPool: every thread runs its own
// clone at the same time, on the same requests, and gets the bytes one
// thread got from the original alone.
TEST_F(PredictorTest, ClonesRunAtOnceOnThreadsAndMatchOneThread) {
  std::string dir = WriteMlp("m");
  Config config(dir + "/model.pdmodel", dir + "/model.pdiparams");
  struct Request {
    int64_t batch;
    std::vector<float> x;
    std::vector<int64_t> ids;
    std::vector<float> prob, mixed;  // the original's, on one thread
  };
  auto run = [](Predictor& p, const Request& r, std::vector<float>* prob,
                std::vector<float>* mixed) {
    auto x = p.GetInputHandle("x");
    x->Reshape({r.batch, kIn});
    x->CopyFromCpu(r.x.data());
    auto ids = p.GetInputHandle("ids");
    ids->Reshape({r.batch, kSeq});
    ids->CopyFromCpu(r.ids.data());
    p.Run();
    prob->resize(static_cast<size_t>(r.batch * kClasses));
    mixed->resize(prob->size());
    p.GetOutputHandle("prob")->CopyToCpu(prob->data());
    p.GetOutputHandle("mixed")->CopyToCpu(mixed->data());
  };
  constexpr int kThreads = 4, kRequests = 24, kRunsPerThread = 60;
  services::PredictorPool pool(config, kThreads);
  ASSERT_EQ(pool.size(), static_cast<size_t>(kThreads));
  std::vector<Request> requests(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    Request& r = requests[static_cast<size_t>(i)];
    r.batch = 1 + i % 6;  // several compiled shapes per clone
    r.x = RandomFloats(rng_, static_cast<size_t>(r.batch * kIn));
    r.ids = RandomIds(rng_, static_cast<size_t>(r.batch * kSeq));
    run(*pool.Retrive(0), r, &r.prob, &r.mixed);
  }
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Predictor& p = *pool.Retrieve(static_cast<size_t>(t));
      std::vector<float> prob, mixed;
      try {
        for (int k = 0; k < kRunsPerThread; ++k) {
          const Request& r = requests[static_cast<size_t>((k * 5 + t * 7) % kRequests)];
          run(p, r, &prob, &mixed);
          if (prob != r.prob || mixed != r.mixed) ++mismatches;
        }
      } catch (const std::exception& e) {
        ++failures;
        ADD_FAILURE() << "thread " << t << ": " << e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  // The original still answers like the reference after its clones ran.
  RunAndCheck(*pool.Retrive(0), 3);
  ExpectError([&] { pool.Retrive(kThreads); }, ErrorKind::kInvalidArgument,
              {"Retrive(4)", "4 predictor(s)"});
  ExpectError([&] { services::PredictorPool empty(config, 0); }, ErrorKind::kInvalidArgument,
              {"size must be >= 1"});
  // A clone of a clone is a clone of the same model.
  auto original = CreatePredictor(config);
  auto grandchild = original->Clone()->Clone();
  RunAndCheck(*grandchild, 2);
}

TEST_F(PredictorTest, ModelDirectory) {
  std::string dir = WriteMlp("saved");
  auto predictor = CreatePredictor(Config(dir));
  EXPECT_EQ(predictor->GetInputNames(), (std::vector<std::string>{"x", "ids"}));
  RunAndCheck(*predictor, 2);
}

// A predictor keeps its packed weights only (paddle::ParamSource): a new
// input shape reads the params file again. A file that changed since it was
// loaded is refused by name, not used; with TILLER_KEEP_LOADED_WEIGHTS=1 the
// loaded bytes are kept and the file is never read again.
TEST_F(PredictorTest, WeightsAreReadAgainForNewShapesAndAChangedFileIsRefused) {
  std::string dir = WriteMlp("m");
  const std::string params = dir + "/model.pdiparams";
  auto predictor = CreatePredictor(Config(dir + "/model.pdmodel", params));
  RunAndCheck(*predictor, 3);
  RunAndCheck(*predictor, 7);  // compiled from weights read back from the file
  auto clone = predictor->Clone();
  RunAndCheck(*clone, 5);

  const Weights loaded = weights_;
  std::mt19937 other(7);
  Write("m/model.pdiparams", MlpParams(RandomWeights(other)));
  fs::last_write_time(params, fs::last_write_time(params) + std::chrono::seconds(2));
  RunAndCheck(*predictor, 3);  // compiled already: runs on what it packed
  ExpectError([&] { RunAndCheck(*predictor, 4); }, ErrorKind::kDataLoss,
              {params, "changed since the model was loaded", "TILLER_KEEP_LOADED_WEIGHTS"});

  setenv("TILLER_KEEP_LOADED_WEIGHTS", "1", 1);
  auto keeping = CreatePredictor(Config(dir + "/model.pdmodel", params));
  unsetenv("TILLER_KEEP_LOADED_WEIGHTS");
  weights_ = RandomWeights(other = std::mt19937(7));
  RunAndCheck(*keeping, 2);
  Write("m/model.pdiparams", MlpParams(loaded));
  fs::last_write_time(params, fs::last_write_time(params) + std::chrono::seconds(4));
  RunAndCheck(*keeping, 6);  // the bytes it loaded, not the file's new ones

  // A params file moved away is named too.
  weights_ = loaded;
  auto gone = CreatePredictor(Config(dir + "/model.pdmodel", params));
  RunAndCheck(*gone, 2);
  fs::rename(params, params + ".moved");
  ExpectError([&] { RunAndCheck(*gone, 3); }, ErrorKind::kNotFound,
              {params, "the params file is gone"});
}

// ---- Errors -----------------------------------------------------------------

TEST_F(PredictorTest, MissingModelFile) {
  std::string model = Path("absent/model.pdmodel");
  ExpectError([&] { CreatePredictor(Config(model, Path("absent/model.pdiparams"))); },
              ErrorKind::kNotFound, {model});
  // Program present, params missing: the params path is the one named.
  std::string dir = WriteMlp("m");
  std::string params = Path("m/other.pdiparams");
  ExpectError([&] { CreatePredictor(Config(dir + "/model.pdmodel", params)); },
              ErrorKind::kNotFound, {params});
  // A directory holding no model.
  fs::create_directories(dir_ / "empty");
  ExpectError([&] { CreatePredictor(Config(Path("empty"))); }, ErrorKind::kNotFound,
              {Path("empty")});
}

TEST_F(PredictorTest, TruncatedParams) {
  std::string model = Write("model.pdmodel", MlpProgram());
  std::string full = MlpParams(weights_);
  // Cut inside the last record's data, inside the first record's header,
  // and after the first record exactly.
  size_t first_record = Record(kF32, {kVocab, kClasses}, weights_.emb).size();
  for (size_t size : {full.size() - 1, size_t{10}, first_record}) {
    SCOPED_TRACE(fmt::format("{} of {} bytes", size, full.size()));
    std::string params = Write("cut.pdiparams", full.substr(0, size));
    ExpectError([&] { CreatePredictor(Config(model, params)); }, ErrorKind::kDataLoss, {params});
  }
}

TEST_F(PredictorTest, UnknownInputAndOutputNames) {
  std::string dir = WriteMlp("m");
  auto predictor = CreatePredictor(Config(dir));
  ExpectError([&] { predictor->GetInputHandle("input_ids"); }, ErrorKind::kNotFound,
              {"input_ids", "x", "ids"});
  ExpectError([&] { predictor->GetOutputHandle("logits"); }, ErrorKind::kNotFound,
              {"logits", "prob", "mixed"});
}

TEST_F(PredictorTest, CopyFromCpuWrongDtype) {
  std::string dir = WriteMlp("m");
  auto predictor = CreatePredictor(Config(dir));
  auto x = predictor->GetInputHandle("x");
  x->Reshape({2, kIn});
  std::vector<int32_t> data(2 * kIn, 1);
  ExpectError([&] { x->CopyFromCpu(data.data()); }, ErrorKind::kInvalidArgument,
              {"'x'", "float32", "int32"});
  // The int64 input rejects float data the same way.
  auto ids = predictor->GetInputHandle("ids");
  ids->Reshape({2, kSeq});
  std::vector<float> floats(2 * kSeq, 1.0f);
  ExpectError([&] { ids->CopyFromCpu(floats.data()); }, ErrorKind::kInvalidArgument,
              {"'ids'", "int64", "float32"});
}

TEST_F(PredictorTest, ReshapeMismatch) {
  std::string dir = WriteMlp("m");
  auto predictor = CreatePredictor(Config(dir));
  auto x = predictor->GetInputHandle("x");
  ExpectError([&] { x->Reshape({2}); }, ErrorKind::kInvalidArgument, {"'x'", "[2]", "[-1, 8]"});
  ExpectError([&] { x->Reshape({2, kIn, 1}); }, ErrorKind::kInvalidArgument, {"'x'", "[2, 8, 1]"});
  ExpectError(
      [&] {
        x->Reshape({2, 7});
      },
      ErrorKind::kInvalidArgument, {"'x'", "[2, 7]", "[-1, 8]"});
  auto ids = predictor->GetInputHandle("ids");
  ExpectError(
      [&] {
        ids->Reshape({2, 4});
      },
      ErrorKind::kInvalidArgument, {"'ids'", "[2, 4]", "[-1, 5]"});
  // Copying into a dynamic input before any Reshape cannot know the size.
  std::vector<float> data(kIn, 0.0f);
  ExpectError([&] { x->CopyFromCpu(data.data()); }, ErrorKind::kInvalidArgument, {"'x'"});
}

TEST_F(PredictorTest, RunBeforeInputsSet) {
  std::string dir = WriteMlp("m");
  auto predictor = CreatePredictor(Config(dir));
  ExpectError([&] { predictor->Run(); }, ErrorKind::kInvalidArgument, {"'x'"});
  auto x = predictor->GetInputHandle("x");
  x->Reshape({2, kIn});
  std::vector<float> data(2 * kIn, 0.5f);
  x->CopyFromCpu(data.data());
  // "ids" still unset (only reshaped).
  predictor->GetInputHandle("ids")->Reshape({2, kSeq});
  ExpectError([&] { predictor->Run(); }, ErrorKind::kInvalidArgument, {"'ids'"});
}

TEST_F(PredictorTest, ReshapeAfterRunNeedsNewData) {
  std::string dir = WriteMlp("m");
  auto predictor = CreatePredictor(Config(dir));
  RunAndCheck(*predictor, 2);
  // A new shape invalidates the data copied for the old one.
  predictor->GetInputHandle("x")->Reshape({3, kIn});
  ExpectError([&] { predictor->Run(); }, ErrorKind::kInvalidArgument, {"'x'"});
}

TEST_F(PredictorTest, OutputReadBeforeRun) {
  std::string dir = WriteMlp("m");
  auto predictor = CreatePredictor(Config(dir));
  auto out = predictor->GetOutputHandle("prob");
  std::vector<float> buf(2 * kClasses);
  ExpectError([&] { out->CopyToCpu(buf.data()); }, ErrorKind::kInvalidArgument, {"'prob'", "Run"});
  ExpectError([&] { out->shape(); }, ErrorKind::kInvalidArgument, {"'prob'", "Run"});
}

TEST_F(PredictorTest, UnsupportedOpsListedWithCounts) {
  std::vector<Pb> vars = {
      ListVar("feed", kFeed),   ListVar("fetch", kFetch), Var("x", kF32, {-1, 4}),
      Var("t0", kF32, {-1, 4}), Var("t1", kF32, {-1, 4}), Var("t2", kF32, {-1, 4}),
      Var("t3", kF32, {-1, 4}),
  };
  std::vector<Pb> ops = {
      Feed("x", 0),
      Op("foo_op", {Slot("X", {"x"})}, {Slot("Out", {"t0"})}),
      Op("relu", {Slot("X", {"t0"})}, {Slot("Out", {"t1"})}),
      Op("bar_op", {Slot("X", {"t1"})}, {Slot("Out", {"t2"})}),
      Op("foo_op", {Slot("X", {"t2"})}, {Slot("Out", {"t3"})}),
      Fetch("t3", 0),
  };
  std::string model = Write("unsupported.pdmodel", ProgramBytes(vars, ops));
  // No persistable variables: an empty params file holds all zero records.
  std::string params = Write("unsupported.pdiparams", "");
  // Whether this is reported at CreatePredictor or at the first Run (which
  // translates the program) is Tiller's choice; either way every missing op
  // type is listed once, with its count, and supported ones are not.
  ExpectError(
      [&] {
        auto predictor = CreatePredictor(Config(model, params));
        auto x = predictor->GetInputHandle("x");
        x->Reshape({2, 4});
        std::vector<float> data(8, 1.0f);
        x->CopyFromCpu(data.data());
        predictor->Run();
      },
      ErrorKind::kUnimplemented, {model, "foo_op (x2)", "bar_op (x1)"}, {"relu"});
}

}  // namespace
}  // namespace tiller::inference
