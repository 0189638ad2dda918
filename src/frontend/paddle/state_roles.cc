// The split follows Paddle 3.3.1's Python source (paddle/static/io.py,
// paddle/static/pir_io.py, paddle/framework/io_utils.py):
//
// Legacy programs, io.py save():
//   parameter_list = filter(is_parameter, program.list_vars())  -> .pdparams
//   optimizer_var_list = filter(is_belong_to_optimizer, ...)     -> .pdopt
// where io_utils.is_parameter(var) is isinstance(var, Parameter) and
// is_belong_to_optimizer(var) is "not a Parameter, not need_check_feed, and
// is_persistable(var)" (persistable and not FEED_MINIBATCH / FETCH_LIST /
// READER). A program read from a file has a Parameter exactly where its
// VarDesc has is_parameter set (framework.py Block._sync_with_cpp), so the
// VarDesc bits decide: batch-norm statistics (created as parameters) are in
// .pdparams, learning_rate_0 and the accumulators in .pdopt.
//
// PIR programs, pir_io.py save_pir() / get_pir_parameters():
//   var.is_parameter or defining op builtin.parameter -> params
//   elif var.persistable and defining op pd_op.data   -> opts
// each kept only when var.persistable. The PIR learning rate is a
// builtin.parameter, so it lands in .pdparams there.
//
// Roles come from the optimizer ops (ops with Param and Grad inputs, as
// training.cc finds them): Param -> parameter, LearningRate -> learning
// rate, every other persistable input -> optimizer state; a remaining
// Paddle parameter is a statistic (running mean/variance, frozen weights),
// anything else "other".
#include "frontend/paddle/state_roles.h"

#include <set>
#include <string>

namespace tiller::paddle {
namespace {

// io_utils.is_persistable: persistable, and not a feed/fetch list or reader.
bool IsPersistable(const VarInfo& v) {
  constexpr int64_t kFeedMinibatch = 9, kFetchList = 10, kReader = 15;
  return v.persistable && v.var_type != kFeedMinibatch && v.var_type != kFetchList &&
         v.var_type != kReader;
}

}  // namespace

SaveFile PaddleSaveFile(const Program& program, const VarInfo& var) {
  if (program.format == "pir") {
    if (!var.persistable) return SaveFile::kNone;
    // The PIR reader marks persistable only builtin.parameter results and
    // persistable pd_op.data; Paddle finds no other persistable values in
    // its programs (their in-place results are not persistable).
    return var.is_parameter ? SaveFile::kPdparams : SaveFile::kPdopt;
  }
  if (var.is_parameter) return SaveFile::kPdparams;
  if (var.need_check_feed || !IsPersistable(var)) return SaveFile::kNone;
  return SaveFile::kPdopt;
}

std::vector<StateVariable> ClassifyState(const Program& program) {
  std::set<std::string> params, lrs, opt_state;
  for (const OpDesc& op : program.ops) {
    if (!op.HasInput("Param") || !op.HasInput("Grad")) continue;
    for (const auto& [slot, names] : op.inputs) {
      if (slot == "Grad") continue;
      for (const std::string& n : names) {
        const VarInfo* v = program.FindVar(n);
        if (slot == "Param") {
          params.insert(n);
        } else if (slot == "LearningRate") {
          lrs.insert(n);
        } else if (v && IsPersistable(*v)) {
          opt_state.insert(n);
        }
      }
    }
  }
  std::vector<StateVariable> out;
  for (const auto& [name, var] : program.vars) {
    SaveFile file = PaddleSaveFile(program, var);
    if (!IsPersistable(var) && file == SaveFile::kNone) continue;
    StateRole role = StateRole::kOther;
    if (lrs.count(name))
      role = StateRole::kLearningRate;
    else if (params.count(name))
      role = StateRole::kParameter;
    else if (opt_state.count(name))
      role = StateRole::kOptimizerState;
    else if (var.is_parameter)
      role = StateRole::kStatistic;
    out.push_back({name, role, file});
  }
  return out;
}

std::map<std::string, int> OptimizerAccumulators(const Program& program) {
  static const std::map<std::string, std::vector<std::pair<const char*, int>>> kSlots = {
      {"adam", {{"Moment1", 1}, {"Moment2", 2}, {"Moment2Max", 2}}},
      {"adamw", {{"Moment1", 1}, {"Moment2", 2}, {"Moment2Max", 2}}},
      {"lamb", {{"Moment1", 1}, {"Moment2", 2}}},
      {"adamax", {{"Moment", 1}, {"InfNorm", 2}}},
      {"adagrad", {{"Moment", 1}}},
      {"adadelta", {{"AvgSquaredGrad", 1}, {"AvgSquaredUpdate", 2}}},
      {"rmsprop", {{"MeanSquare", 1}, {"MeanGrad", 2}, {"Moment", 3}}},
  };
  std::map<std::string, int> out;
  for (const OpDesc& op : program.ops) {
    auto it = kSlots.find(op.type);
    if (it == kSlots.end()) continue;
    for (const auto& [slot, index] : it->second) {
      for (const std::string& var : op.Inputs(slot)) out.emplace(var, index);
    }
  }
  return out;
}

}  // namespace tiller::paddle
