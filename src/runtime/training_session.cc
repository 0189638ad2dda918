// TrainingSession: the program is analysed once; each set of feed shapes
// (and eval/train) compiles its own step, and all of them bind the same
// state buffers, which the session owns.
#include <fmt/format.h>

#include <cstring>
#include <map>
#include <set>

#include "compile/executable.h"
#include "core/aligned_buffer.h"
#include "core/error.h"
#include "frontend/paddle/program.h"
#include "frontend/paddle/training.h"
#include "frontend/paddle/translate.h"
#include "passes/autodiff.h"
#include "runtime/api_types.h"
#include "tiller/training.h"

namespace tiller::training {

using inference::FromApi;
using inference::ToApi;

struct TrainingSession::Impl {
  paddle::Program program;
  paddle::TrainingProgramInfo info;
  SessionOptions options;
  std::vector<std::string> feed_names, fetch_names;

  struct State {
    ir::TensorType type;
    AlignedBuffer data;
    bool set = false;
  };
  std::map<std::string, State> states;
  std::map<std::string, ir::TensorType> state_types;
  compile::StateStorage storage;

  struct Feed {
    ir::TensorType type;
    AlignedBuffer data;
    bool set = false;
  };
  std::vector<Feed> feeds;
  std::map<std::pair<bool, std::vector<Shape>>, std::unique_ptr<compile::Executable>> cache;
  compile::Executable* last = nullptr;
  bool last_eval = false;
  int64_t steps = 0;
  // Per compiled step: whether the diagnostic re-run after a failed check is
  // safe (no state is written in place before the last checked value).
  struct Guard {
    bool rerun_safe = false;
  };
  std::map<const compile::Executable*, Guard> guards;

  State& FindState(const std::string& name) {
    auto it = states.find(name);
    if (it == states.end())
      Fail(ErrorKind::kNotFound, "{}: '{}' is not a persistable variable of the program",
           program.path, name);
    return it->second;
  }

  compile::Executable& Compile(bool eval) {
    std::vector<Shape> shapes;
    std::vector<ir::TensorType> types;
    for (size_t i = 0; i < feeds.size(); ++i) {
      if (!feeds[i].set)
        Fail(ErrorKind::kInvalidArgument, "feed '{}' was not set before Run()", feed_names[i]);
      shapes.push_back(feeds[i].type.shape);
      types.push_back(feeds[i].type);
    }
    auto key = std::make_pair(eval, shapes);
    auto it = cache.find(key);
    if (it != cache.end()) return *it->second;
    paddle::TrainingGraphOptions o;
    o.eval = eval;
    o.random_seed = options.random_seed;
    o.no_bias_optimizer = options.no_bias_optimizer;
    paddle::TrainingTranslation t(program, info, state_types, feed_names, types, fetch_names,
                                  compile::FoldWithCpuKernels, o);
    ir::Value* loss = t.Forward();
    if (!eval) {
      std::vector<ir::Value*> wrt = t.Trained();
      auto grads = passes::BuildBackward(t.graph(), loss, wrt);
      std::vector<ir::Value*> g;
      for (ir::Value* v : wrt) g.push_back(grads.at(v));
      t.Update(g);
    }
    paddle::TrainingGraph tg = t.Finish();
    compile::CompileOptions co;
    co.num_threads = options.num_threads;
    auto exe = compile::Executable::Build(std::move(tg.graph), co, storage);
    exe->EnableNanInfCheck(options.check_nan_inf);
    // The loss and every gradient are checked right after they are computed,
    // before any update reads them.
    Guard guard;
    int last_guard = exe->GuardFinite(tg.loss, fmt::format("the loss '{}'", info.loss));
    for (const auto& [name, g] : tg.gradients)
      last_guard =
          std::max(last_guard, exe->GuardFinite(g, fmt::format("the gradient of '{}'", name)));
    std::set<const ir::Op*> in_place_writers;
    for (const auto& [value, state] : exe->plan().in_state)
      in_place_writers.insert(value->producer);
    const auto& ops = exe->graph().ops();
    guard.rerun_safe = true;
    for (int i = 0; i <= last_guard && i < static_cast<int>(ops.size()); ++i) {
      if (in_place_writers.count(ops[i].get())) guard.rerun_safe = false;
    }
    guards[exe.get()] = guard;
    return *cache.emplace(key, std::move(exe)).first->second;
  }
};

TrainingSession::TrainingSession(const std::string& program_path,
                                 std::vector<std::string> feed_names,
                                 std::vector<std::string> fetch_names,
                                 const SessionOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.program = paddle::ReadProgramFile(program_path);
  s.info = paddle::AnalyzeTrainingProgram(s.program);
  s.options = options;
  s.feed_names = std::move(feed_names);
  s.fetch_names = std::move(fetch_names);
  for (const std::string& name : s.info.state) {
    const paddle::VarInfo* v = s.program.FindVar(name);
    if (!v)
      Fail(ErrorKind::kDataLoss, "{}: persistable '{}' has no variable", s.program.path, name);
    for (int64_t d : v->dims) {
      if (d < 0)
        Fail(ErrorKind::kInvalidArgument, "{}: persistable '{}' has a dynamic shape {}",
             s.program.path, name, ShapeToString(v->dims));
    }
    Impl::State st;
    st.type = {v->dtype, v->dims};
    st.data.Resize(st.type.bytes());
    auto [it, fresh] = s.states.emplace(name, std::move(st));
    s.state_types[name] = it->second.type;
    s.storage[name] = it->second.data.data();
  }
  for (const std::string& name : s.feed_names) {
    const paddle::VarInfo* v = s.program.FindVar(name);
    if (!v)
      Fail(ErrorKind::kNotFound, "{}: feed '{}' is not a variable of the program", s.program.path,
           name);
    Impl::Feed f;
    f.type.dtype = v->dtype;
    f.type.shape = v->dims;
    s.feeds.push_back(std::move(f));
  }
  for (const std::string& name : s.fetch_names) {
    if (!s.program.FindVar(name))
      Fail(ErrorKind::kNotFound, "{}: fetch '{}' is not a variable of the program", s.program.path,
           name);
  }
}

TrainingSession::~TrainingSession() = default;

std::vector<TensorInfo> TrainingSession::StateInfo() const {
  std::vector<TensorInfo> out;
  for (const std::string& name : impl_->info.state) {
    const auto& st = impl_->states.at(name);
    out.push_back({name, ToApi(st.type.dtype), st.type.shape});
  }
  return out;
}

std::vector<std::string> TrainingSession::StateNames() const {
  return impl_->info.state;
}
const std::string& TrainingSession::LossName() const {
  return impl_->info.loss;
}
std::vector<std::string> TrainingSession::TrainedNames() const {
  return impl_->info.trained;
}
const std::vector<std::string>& TrainingSession::FetchNames() const {
  return impl_->fetch_names;
}
const std::vector<std::string>& TrainingSession::FeedNames() const {
  return impl_->feed_names;
}

void TrainingSession::SetState(const std::string& name, const void* data, DataType dtype,
                               size_t bytes) {
  Impl::State& st = impl_->FindState(name);
  if (FromApi(dtype) != st.type.dtype)
    Fail(ErrorKind::kInvalidArgument, "state '{}' is {}, got {}", name, st.type.ToString(),
         inference::DataTypeName(dtype));
  if (bytes != st.type.bytes())
    Fail(ErrorKind::kInvalidArgument, "state '{}' ({}) needs {} bytes, got {}", name,
         st.type.ToString(), st.type.bytes(), bytes);
  if (bytes) std::memcpy(st.data.data(), data, bytes);
  st.set = true;
}

void TrainingSession::GetState(const std::string& name, void* data, size_t bytes) const {
  Impl::State& st = impl_->FindState(name);
  if (bytes != st.type.bytes())
    Fail(ErrorKind::kInvalidArgument, "state '{}' ({}) has {} bytes, buffer has {}", name,
         st.type.ToString(), st.type.bytes(), bytes);
  if (bytes) std::memcpy(data, st.data.data(), bytes);
}

void TrainingSession::SetFeed(const std::string& name, const void* data, DataType dtype,
                              const std::vector<int64_t>& shape) {
  Impl& s = *impl_;
  size_t i = 0;
  while (i < s.feed_names.size() && s.feed_names[i] != name) ++i;
  if (i == s.feed_names.size()) {
    std::string names;
    for (const auto& n : s.feed_names) names += (names.empty() ? "" : ", ") + n;
    Fail(ErrorKind::kNotFound, "no feed named '{}' (feeds: {})", name, names);
  }
  const paddle::VarInfo* v = s.program.FindVar(name);
  if (FromApi(dtype) != v->dtype)
    Fail(ErrorKind::kInvalidArgument, "feed '{}' expects {}, got {}", name, DTypeName(v->dtype),
         inference::DataTypeName(dtype));
  bool ok = v->dims.size() == shape.size();
  for (size_t d = 0; ok && d < shape.size(); ++d)
    ok = shape[d] >= 0 && (v->dims[d] < 0 || v->dims[d] == shape[d]);
  if (!ok)
    Fail(ErrorKind::kInvalidArgument, "feed '{}': shape {} does not match the program's {}", name,
         ShapeToString(shape), ShapeToString(v->dims));
  Impl::Feed& f = s.feeds[i];
  f.type = {v->dtype, shape};
  f.data.Resize(f.type.bytes());
  if (f.type.bytes()) std::memcpy(f.data.data(), data, f.type.bytes());
  f.set = true;
}

void TrainingSession::Run(bool eval) {
  Impl& s = *impl_;
  std::vector<std::string> unset;
  for (const auto& [name, st] : s.states) {
    if (!st.set) unset.push_back(name);
  }
  if (!unset.empty()) {
    std::string list;
    for (size_t i = 0; i < unset.size() && i < 8; ++i) list += (i ? ", " : "") + unset[i];
    if (unset.size() > 8) list += fmt::format(", ... ({} in all)", unset.size());
    Fail(ErrorKind::kInvalidArgument, "{}: state not set before Run(): {}", s.program.path, list);
  }
  compile::Executable& exe = s.Compile(eval);
  for (size_t i = 0; i < s.feeds.size(); ++i) {
    if (s.feeds[i].type.bytes())
      std::memcpy(exe.inputs()[i].data, s.feeds[i].data.data(), s.feeds[i].type.bytes());
  }
  // Random training ops (dropout) draw from (seed, step number), so masks
  // change every step and repeat for the same seed.
  for (size_t i = s.feeds.size(); i < exe.inputs().size(); ++i) {
    compile::TensorSlot& slot = exe.inputs()[i];
    TILLER_CHECK(slot.name == paddle::TranslateContext::kStepInput, "unexpected graph input '{}'",
                 slot.name);
    int64_t step_index = s.steps;
    std::memcpy(slot.data, &step_index, sizeof(step_index));
  }
  int64_t step = s.steps + 1;
  try {
    exe.Run();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNonFinite) throw;
    std::string where = e.what();
    const Impl::Guard& guard = s.guards.at(&exe);
    if (!s.options.check_nan_inf && guard.rerun_safe) {
      // Only the loss was checked and nothing was updated: run the step again
      // checking every op, to name the first one that went non-finite.
      exe.EnableNanInfCheck(true);
      try {
        exe.Run();
      } catch (const Error& detail) {
        if (detail.kind() != ErrorKind::kNonFinite) throw;
        where = fmt::format("{}; the first op that went non-finite: {}", where, detail.what());
      }
      exe.EnableNanInfCheck(false);
    }
    Fail(ErrorKind::kNonFinite, "{}: {} step {}: {}", s.program.path, eval ? "eval" : "training",
         step, where);
  }
  if (!eval) s.steps = step;
  s.last = &exe;
  s.last_eval = eval;
}

int64_t TrainingSession::StepCount() const {
  return impl_->steps;
}

TensorInfo TrainingSession::FetchInfo(size_t i) const {
  const compile::Executable* exe = impl_->last;
  if (!exe) Fail(ErrorKind::kInvalidArgument, "fetches read before Run()");
  if (i >= impl_->fetch_names.size())
    Fail(ErrorKind::kInvalidArgument, "fetch {} of {}", i, impl_->fetch_names.size());
  const auto& slot = exe->outputs()[i];
  return {slot.name, ToApi(slot.type.dtype), slot.type.shape};
}

void TrainingSession::GetFetch(size_t i, void* data, size_t bytes) const {
  FetchInfo(i);
  const auto& slot = impl_->last->outputs()[i];
  if (bytes != slot.type.bytes())
    Fail(ErrorKind::kInvalidArgument, "fetch '{}' has {} bytes, buffer has {}", slot.name,
         slot.type.bytes(), bytes);
  if (bytes) std::memcpy(data, slot.data, bytes);
}

TrainingSession::Summary TrainingSession::GetSummary() const {
  const compile::Executable* exe = impl_->last;
  if (!exe) Fail(ErrorKind::kInvalidArgument, "GetSummary() needs a Run() first");
  Summary s;
  s.arena_bytes = exe->plan().arena_bytes();
  for (const auto& [name, st] : impl_->states) s.state_bytes += st.type.bytes();
  s.in_place_updates = exe->plan().in_state.size();
  s.copied_updates = exe->plan().copy_back.size();
  s.graph = exe->graph().ToString();
  return s;
}

}  // namespace tiller::training
