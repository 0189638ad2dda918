// Training from C++ alone, with checkpoints: a Paddle training program and
// its initial checkpoint (as paddle.static.save wrote them) are trained for
// N steps, interrupted at step K by a checkpoint, resumed in a new session,
// and the losses and final checkpoint written out. Only public headers, as
// a C++ user would.
//
// The fixture is a directory named by TILLER_TRAIN_FIXTURE (the test skips
// without one); tests/python/training_cpp_test.py builds it with Paddle
// (BERT-tiny, Lamb, warm-up + decay) and compares the outputs, bit for bit,
// with the same steps run uninterrupted through tiller.IpuCompiledProgram:
//   fixture.txt     "key value..." lines: program FILE, init PREFIX,
//                   feeds NAME..., fetches NAME..., steps N, save_at K,
//                   num_threads T
//   steps.pkl       a pickle of arrays: "<step>/<feed>" for every step and
//                   feed, "lr" (float64 [N]) the learning rate of each step
//   PREFIX.pdparams / .pdopt   the initial state
// Outputs, in TILLER_TRAIN_OUT (default: the fixture directory):
//   losses.pkl      "losses": float32 [N, fetches]
//   resume.pdparams / .pdopt   the checkpoint written at step K
//   final.pdparams / .pdopt    the state after step N
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tiller/checkpoint.h"
#include "tiller/data_type.h"
#include "tiller/ipu_options.h"
#include "tiller/training.h"

namespace {

using tiller::DataType;
using tiller::checkpoint::HostArray;
using tiller::checkpoint::SaveFile;
using tiller::checkpoint::StateRole;
using tiller::training::IpuOptions;
using tiller::training::StateTensorInfo;
using tiller::training::TrainingSession;

struct Fixture {
  std::string dir, out;
  std::map<std::string, std::vector<std::string>> fields;

  std::string One(const std::string& key) const {
    auto it = fields.find(key);
    if (it == fields.end() || it->second.size() != 1)
      throw std::runtime_error("fixture.txt: '" + key + "' needs one value");
    return it->second[0];
  }
  int Int(const std::string& key) const { return std::stoi(One(key)); }
  const std::vector<std::string>& List(const std::string& key) const { return fields.at(key); }
  std::string Path(const std::string& name) const { return dir + "/" + name; }
  std::string Out(const std::string& name) const { return out + "/" + name; }
};

Fixture ReadFixture(const std::string& dir) {
  Fixture f;
  f.dir = dir;
  const char* out = std::getenv("TILLER_TRAIN_OUT");
  f.out = out && *out ? out : dir;
  std::ifstream in(dir + "/fixture.txt");
  if (!in) throw std::runtime_error("cannot open " + dir + "/fixture.txt");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string key, word;
    if (!(words >> key) || key[0] == '#') continue;
    auto& values = f.fields[key];
    while (words >> word) values.push_back(word);
  }
  return f;
}

std::map<std::string, HostArray> ByName(std::vector<HostArray> arrays) {
  std::map<std::string, HostArray> out;
  for (HostArray& a : arrays) {
    std::string name = a.name;
    out.emplace(std::move(name), std::move(a));
  }
  return out;
}

size_t Bytes(const tiller::training::TensorInfo& t) {
  size_t n = tiller::SizeOf(t.dtype);
  for (int64_t d : t.shape) n *= static_cast<size_t>(d);
  return n;
}

// Every state of the session equals the arrays of a checkpoint, byte for byte.
void ExpectStateIs(const TrainingSession& s, const std::string& prefix) {
  auto saved = ByName(tiller::checkpoint::ReadPaddlePickle(prefix + ".pdparams"));
  for (auto& [name, a] : ByName(tiller::checkpoint::ReadPaddlePickle(prefix + ".pdopt")))
    saved.insert_or_assign(name, std::move(a));
  for (const StateTensorInfo& info : s.StateInfo()) {
    auto it = saved.find(info.name);
    ASSERT_NE(it, saved.end()) << info.name << " is not in " << prefix;
    std::vector<uint8_t> have(Bytes(info));
    s.GetState(info.name, have.data(), have.size());
    EXPECT_EQ(have, it->second.data) << info.name;
  }
}

std::unique_ptr<TrainingSession> NewSession(const Fixture& f) {
  IpuOptions options;
  options.SetGraphConfig(/*num_ipus=*/1, /*is_training=*/true,
                         /*micro_batch_size=*/f.Int("micro_batch_size"));
  options.Set("num_threads", int64_t{f.Int("num_threads")});
  return std::make_unique<TrainingSession>(f.Path(f.One("program")), f.List("feeds"),
                                           f.List("fetches"), options);
}

TEST(TrainingResumeTest, TrainsSavesAndResumesFromCxxAlone) {
  const char* dir = std::getenv("TILLER_TRAIN_FIXTURE");
  if (!dir || !*dir)
    GTEST_SKIP() << "set TILLER_TRAIN_FIXTURE to a fixture directory "
                    "(tests/python/training_cpp_test.py writes one and runs this test)";
  const Fixture f = ReadFixture(dir);
  const int steps = f.Int("steps"), save_at = f.Int("save_at");
  const auto& feeds = f.List("feeds");
  const size_t n_fetch = f.List("fetches").size();
  const auto data = ByName(tiller::checkpoint::ReadPaddlePickle(f.Path("steps.pkl")));
  const HostArray& lr = data.at("lr");
  ASSERT_EQ(lr.dtype, "float64");
  ASSERT_EQ(lr.data.size(), steps * sizeof(double));

  auto session = NewSession(f);
  // Roles and files: what a checkpoint of this program holds.
  int params = 0, moments = 0, rates = 0;
  for (const StateTensorInfo& info : session->StateInfo()) {
    params += info.role == StateRole::kParameter;
    moments += info.role == StateRole::kOptimizerState;
    rates += info.role == StateRole::kLearningRate;
    if (info.role == StateRole::kParameter) {
      EXPECT_EQ(info.file, SaveFile::kPdparams) << info.name;
    }
    if (info.role == StateRole::kOptimizerState) {
      EXPECT_EQ(info.file, SaveFile::kPdopt) << info.name;
    }
  }
  EXPECT_GT(params, 0);
  EXPECT_GT(moments, 0);
  EXPECT_GT(rates, 0);
  session->LoadCheckpoint(f.Path(f.One("init")));

  HostArray losses{"losses", "float32", {steps, static_cast<int64_t>(n_fetch)}, {}};
  losses.data.resize(static_cast<size_t>(steps) * n_fetch * sizeof(float));
  for (int step = 0; step < steps; ++step) {
    if (step == save_at) {
      // An interruption: checkpoint, a new session (as a restarted program
      // makes), resume. The checkpoint's manifest (<prefix>.tiller.json)
      // gives the new session the step count, which draws dropout masks.
      session->SaveCheckpoint(f.Out("resume"));
      session = NewSession(f);
      session->LoadCheckpoint(f.Out("resume"));
      ExpectStateIs(*session, f.Out("resume"));
    }
    double rate;
    std::memcpy(&rate, lr.data.data() + step * sizeof(double), sizeof(double));
    session->SetLearningRate(rate);
    for (const std::string& name : feeds) {
      const HostArray& a = data.at(std::to_string(step) + "/" + name);
      DataType dtype;
      ASSERT_TRUE(tiller::ParseDataType(a.dtype, &dtype)) << a.dtype;
      session->SetFeed(name, a.data.data(), dtype, a.shape);
    }
    session->Run();
    for (size_t i = 0; i < n_fetch; ++i) {
      auto info = session->FetchInfo(i);
      ASSERT_EQ(info.dtype, DataType::FLOAT32) << info.name;
      ASSERT_EQ(Bytes(info), sizeof(float)) << info.name;
      session->GetFetch(i, losses.data.data() + (step * n_fetch + i) * sizeof(float),
                        sizeof(float));
    }
  }
  EXPECT_EQ(session->StepCount(), steps);
  session->SaveCheckpoint(f.Out("final"));
  tiller::checkpoint::WritePaddlePickle(f.Out("losses.pkl"), {losses});
  ExpectStateIs(*session, f.Out("final"));
}

}  // namespace
