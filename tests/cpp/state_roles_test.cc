// State roles and paddle.static.save's file split (state_roles.h) on small
// in-memory programs of both forms. The comparison with what Paddle writes
// for real training programs is tests/python/checkpoint_io_test.py.
#include "frontend/paddle/state_roles.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>

#include "frontend/paddle/program.h"

namespace tiller::paddle {
namespace {


VarInfo Var(const std::string& name, bool persistable, bool is_parameter = false) {
  VarInfo v;
  v.name = name;
  v.persistable = persistable;
  v.is_parameter = is_parameter;
  return v;
}

// Adam over w and momentum over b, sharing the learning rate; a batch-norm
// statistic, a step counter no optimizer reads, a feed, a fetch list and a
// temporary.
Program Sample(const std::string& format) {
  Program p;
  p.path = "train";
  p.format = format;
  for (VarInfo v :
       {Var("w", true, true), Var("b", true, true), Var("bn.mean", true, true),
        Var("w_moment1_0", true), Var("w_beta1_pow_acc_0", true), Var("b_velocity_0", true),
        Var("learning_rate_0", true), Var("@LR_DECAY_COUNTER@", true), Var("x", false),
        Var("fetch", true), Var("beta1_tensor", false), Var("w@GRAD", false)}) {
    p.vars[v.name] = v;
  }
  p.vars["x"].need_check_feed = true;
  p.vars["fetch"].var_type = 10;  // FETCH_LIST
  p.vars["fetch"].is_dense_tensor = false;
  OpDesc adam;
  adam.type = "adam";
  adam.inputs = {{"Param", {"w"}},
                 {"Grad", {"w@GRAD"}},
                 {"LearningRate", {"learning_rate_0"}},
                 {"Moment1", {"w_moment1_0"}},
                 {"Beta1Pow", {"w_beta1_pow_acc_0"}},
                 {"Beta1Tensor", {"beta1_tensor"}}};
  adam.outputs = {{"ParamOut", {"w"}}};
  OpDesc momentum;
  momentum.type = "momentum";
  momentum.inputs = {{"Param", {"b"}},
                     {"Grad", {"w@GRAD"}},
                     {"Velocity", {"b_velocity_0"}},
                     {"LearningRate", {"learning_rate_0"}}};
  p.ops = {adam, momentum};
  return p;
}

std::map<std::string, std::pair<StateRole, SaveFile>> Classify(const Program& p) {
  std::map<std::string, std::pair<StateRole, SaveFile>> out;
  std::string last;
  for (const auto& v : ClassifyState(p)) {
    EXPECT_LT(last, v.name) << "sorted by name";
    last = v.name;
    out[v.name] = {v.role, v.file};
  }
  return out;
}

TEST(StateRolesTest, LegacyFollowsIsParameterAndIsBelongToOptimizer) {
  std::map<std::string, std::pair<StateRole, SaveFile>> want = {
      {"w", {StateRole::kParameter, SaveFile::kPdparams}},
      {"b", {StateRole::kParameter, SaveFile::kPdparams}},
      {"bn.mean", {StateRole::kStatistic, SaveFile::kPdparams}},
      {"w_moment1_0", {StateRole::kOptimizerState, SaveFile::kPdopt}},
      {"w_beta1_pow_acc_0", {StateRole::kOptimizerState, SaveFile::kPdopt}},
      {"b_velocity_0", {StateRole::kOptimizerState, SaveFile::kPdopt}},
      {"learning_rate_0", {StateRole::kLearningRate, SaveFile::kPdopt}},
      {"@LR_DECAY_COUNTER@", {StateRole::kOther, SaveFile::kPdopt}},
  };
  EXPECT_EQ(Classify(Sample("pdmodel")), want);
}

TEST(StateRolesTest, LegacyWithoutIsParameterPutsEverythingInPdopt) {
  // Programs whose VarDescs lost is_parameter (e.g. written through
  // save_inference_model's clone) are split by Paddle that way too.
  Program p = Sample("pdmodel");
  for (auto& [name, v] : p.vars) v.is_parameter = false;
  auto got = Classify(p);
  EXPECT_EQ(got.at("w"), std::make_pair(StateRole::kParameter, SaveFile::kPdopt));
  EXPECT_EQ(got.at("bn.mean"), std::make_pair(StateRole::kOther, SaveFile::kPdopt));
}

TEST(StateRolesTest, PirPutsParameterOpsInPdparams) {
  Program p = Sample("pir");
  // The PIR learning rate is a builtin.parameter; a parameter saved with
  // persistable = false is written nowhere and is not state.
  p.vars["learning_rate_0"].is_parameter = true;
  p.vars["fetch"] = Var("fetch", false);
  p.vars["frozen"] = Var("frozen", false, true);
  std::map<std::string, std::pair<StateRole, SaveFile>> want = {
      {"w", {StateRole::kParameter, SaveFile::kPdparams}},
      {"b", {StateRole::kParameter, SaveFile::kPdparams}},
      {"bn.mean", {StateRole::kStatistic, SaveFile::kPdparams}},
      {"w_moment1_0", {StateRole::kOptimizerState, SaveFile::kPdopt}},
      {"w_beta1_pow_acc_0", {StateRole::kOptimizerState, SaveFile::kPdopt}},
      {"b_velocity_0", {StateRole::kOptimizerState, SaveFile::kPdopt}},
      {"learning_rate_0", {StateRole::kLearningRate, SaveFile::kPdparams}},
      {"@LR_DECAY_COUNTER@", {StateRole::kOther, SaveFile::kPdopt}},
  };
  EXPECT_EQ(Classify(p), want);
}

}  // namespace
}  // namespace tiller::paddle
