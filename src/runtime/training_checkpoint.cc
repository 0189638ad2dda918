// Checkpoint files (training_checkpoint.h), and the training session's
// SaveCheckpoint and LoadCheckpoint over them.
#include "runtime/training_checkpoint.h"

#include <fmt/format.h>

#include <array>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <list>
#include <system_error>

#include "core/atomic_file.h"
#include "core/content_hash.h"
#include "core/error.h"
#include "frontend/paddle/state_roles.h"
#include "runtime/training_session_impl.h"

namespace tiller::runtime {

namespace {

// <prefix>.tiller.json: what Paddle's pickles do not hold (the step count,
// which draws dropout masks and tells where the data was; loss scaling's
// state) and each tensor's hash, so a torn or bit-flipped checkpoint is
// refused naming the tensor. Paddle's own checkpoints have none.
std::string ManifestPath(const std::string& prefix) {
  return prefix + ".tiller.json";
}

// Whether `path` exists; an error looking (a directory the process may not
// read) counts as absent, and the read or write that follows names it.
bool Exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

// Names of a checkpoint's files: the main set (what Paddle reads: .pdparams,
// .pdopt; and Tiller's manifest), the previous complete set, and the mark
// of a save under way.
constexpr std::array<const char*, 3> kCheckpointSuffixes = {".pdparams", ".pdopt", ".tiller.json"};
std::string PreviousPrefix(const std::string& prefix) {
  return prefix + ".prev";
}
std::string SavingMark(const std::string& prefix) {
  return prefix + ".tiller.saving";
}

// TILLER_CHECKPOINT_CRASH_AT=<point>: the process kills itself (SIGKILL) at
// that point of a save (written, kept, marked, params, opt, manifest,
// done), for the tests that show no point loses the checkpoint; unset in
// normal runs. Read at every point: a test sets it before the save to kill.
void CrashPoint(const char* point) {
  const char* at = std::getenv("TILLER_CHECKPOINT_CRASH_AT");
  if (at && std::strcmp(at, point) == 0) std::raise(SIGKILL);
}

// The temporary files of saves killed part way (AtomicFile's
// "<file>.tmp-<pid>-<n>", a link's "<file>.tmp-link-<pid>"): once a save
// completed, nothing reads them.
void RemoveStaleTemporaries(const std::string& prefix) {
  const std::filesystem::path base(prefix);
  std::error_code ec;
  const std::filesystem::path dir = base.has_parent_path() ? base.parent_path() : ".";
  std::vector<std::string> stems;
  for (const std::string& p : {prefix, PreviousPrefix(prefix)}) {
    for (const char* suffix : kCheckpointSuffixes)
      stems.push_back(std::filesystem::path(p + suffix).filename().string() + ".tmp-");
  }
  stems.push_back(std::filesystem::path(SavingMark(prefix)).filename().string() + ".tmp-");
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    for (const std::string& stem : stems) {
      if (name.rfind(stem, 0) == 0) std::filesystem::remove(entry.path(), ec);
    }
  }
}

// SaveCheckpoint's manifest of what it writes (ManifestPath).
std::string ManifestText(const std::vector<paddle::ArrayView>& params,
                         const std::vector<paddle::ArrayView>& opts,
                         const CheckpointCounters& counters) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& [file, views] : {std::pair{".pdparams", &params}, {".pdopt", &opts}}) {
    for (const paddle::ArrayView& v : *views)
      tensors.push_back({{"name", v.name},
                         {"file", file},
                         {"dtype", v.dtype},
                         {"shape", std::vector<int64_t>(v.shape.begin(), v.shape.end())},
                         {"hash", ContentHashHex(v.data)}});
  }
  const LossScaling& r = counters.loss_scaling;
  const nlohmann::json manifest = {
      {"format", "tiller-checkpoint 1"},
      {"step", counters.step},
      // The global micro-batches the steps consumed: where the data is.
      {"micro_batches", counters.step * counters.accumulation_factor * counters.replicas},
      {"replicas", counters.replicas},
      {"accumulation_factor", counters.accumulation_factor},
      {"random_seed", counters.random_seed},
      {"loss_scaling",
       {{"scale", r.scale},
        {"good_updates", r.good_updates},
        {"bad_updates", r.bad_updates},
        {"skipped", r.skipped}}},
      {"tensors", tensors}};
  return manifest.dump(1);
}

// ReadCheckpoint of files a save of Tiller's wrote, which must include
// the manifest (after an interrupted save, the test of a whole set).
CheckpointFiles ReadSavedCheckpoint(const std::string& path_prefix,
                                    const std::vector<std::string>& names, const StateMap& states) {
  CheckpointFiles files = ReadCheckpoint(path_prefix, names, states);
  // A save writes its manifest last: a set without one is torn.
  if (!files.manifest)
    Fail(ErrorKind::kDataLoss,
         "checkpoint '{}': a save to it stopped before writing its manifest; its files are not "
         "a complete checkpoint",
         path_prefix);
  return files;
}

// A save never leaves the checkpoint unloadable (issue 14): the new files
// are written whole under temporary names first; then, unless the main set
// is not complete (a save interrupted before), the main files become the
// previous set (hard links, each renamed into place); the mark says a save
// is under way; the new files are renamed over the main ones, the manifest
// last; the mark goes. A load that finds the mark checks the main set and
// falls back on the previous one. Killed at any point, either the main set
// is complete or the previous set is, and the mark tells which to check.
void SaveCheckpointFiles(const std::string& prefix, const std::vector<paddle::ArrayView>& params,
                         const std::vector<paddle::ArrayView>& opts,
                         const CheckpointCounters& counters, const std::vector<std::string>& names,
                         const StateMap& states) {
  AtomicFile params_file(prefix + ".pdparams", "checkpoint");
  AtomicFile opts_file(prefix + ".pdopt", "checkpoint");
  AtomicFile manifest_file(ManifestPath(prefix), "checkpoint manifest");
  paddle::WriteArrayPickle(params_file, params);
  paddle::WriteArrayPickle(opts_file, opts);
  const std::string text = ManifestText(params, opts, counters);
  manifest_file.Write(text.data(), text.size());
  CrashPoint("written");
  const std::string mark = SavingMark(prefix);
  bool main_complete = !Exists(mark);
  if (!main_complete) {
    // The last save stopped part way: its files are kept as the previous
    // set only if they are whole (it stopped after its manifest).
    try {
      ReadSavedCheckpoint(prefix, names, states);
      main_complete = true;
    } catch (const Error&) {
    }
  }
  if (main_complete && Exists(prefix + ".pdparams")) {
    const std::string previous = PreviousPrefix(prefix);
    for (const char* suffix : kCheckpointSuffixes) {
      if (Exists(prefix + suffix))
        ReplaceWithLink(prefix + suffix, previous + suffix, "checkpoint");
      else
        RemoveFile(previous + suffix, "checkpoint");
    }
    SyncDirectory(previous, "checkpoint");
    CrashPoint("kept");
  }
  AtomicFile mark_file(mark, "checkpoint mark");
  mark_file.Commit();
  CrashPoint("marked");
  params_file.Commit();
  CrashPoint("params");
  opts_file.Commit();
  CrashPoint("opt");
  manifest_file.Commit();
  CrashPoint("manifest");
  RemoveFile(mark, "checkpoint mark");
  SyncDirectory(mark, "checkpoint mark");
  CrashPoint("done");
  RemoveStaleTemporaries(prefix);
}

}  // namespace

CheckpointFiles ReadCheckpoint(const std::string& path_prefix,
                               const std::vector<std::string>& names, const StateMap& states) {
  // Both files into one dict (a variable in both: .pdopt's value), so a
  // checkpoint of either program form loads into the other (the learning
  // rate is in .pdparams for PIR, in .pdopt for legacy programs).
  std::map<std::string, paddle::PickledArray> values;
  std::string absent;
  for (const auto& [suffix, required] : {std::pair{".pdparams", true}, {".pdopt", false}}) {
    const std::string path = path_prefix + suffix;
    if (!Exists(path)) {
      if (required) Fail(ErrorKind::kNotFound, "checkpoint file '{}' not found", path);
      absent = path;
      continue;
    }
    std::vector<paddle::PickledArray> arrays;
    try {
      arrays = paddle::ReadArrayPickle(path);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kDataLoss)
        Fail(ErrorKind::kDataLoss, "checkpoint file '{}' is corrupt: {}", path, e.what());
      if (e.kind() == ErrorKind::kUnimplemented)
        Fail(ErrorKind::kUnimplemented, "checkpoint file '{}' does not hold a dict of arrays: {}",
             path, e.what());
      throw;
    }
    for (paddle::PickledArray& a : arrays) {
      std::string name = a.name;
      values.insert_or_assign(std::move(name), std::move(a));
    }
  }
  std::vector<std::string> missing;
  for (const std::string& name : names) {
    if (!values.count(name)) missing.push_back(name);
  }
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 8; ++i) list += (i ? ", " : "") + missing[i];
    Fail(ErrorKind::kNotFound, "checkpoint '{}' lacks {} variable(s) of the program: {}{}{}",
         path_prefix, missing.size(), list, missing.size() > 8 ? " ..." : "",
         absent.empty() ? "" : fmt::format(" ('{}' not found)", absent));
  }
  // Check everything before setting anything: a refused checkpoint leaves
  // the state as it was.
  for (const std::string& name : names) {
    const paddle::PickledArray& a = values.at(name);
    const StateTensor& st = states.at(name);
    if (NumElements(a.shape) != NumElements(st.type.shape))
      Fail(ErrorKind::kInvalidArgument,
           "checkpoint '{}': '{}' has shape {}, the program declares {}", path_prefix, name,
           ShapeToString(a.shape), ShapeToString(st.type.shape));
    const char* declared = paddle::NumpyNameOf(st.declared);
    if (a.dtype != declared)
      Fail(ErrorKind::kInvalidArgument, "checkpoint '{}': '{}' is {}, the program declares {}",
           path_prefix, name, a.dtype, declared);
    TILLER_CHECK(a.data->size() == st.declared_type().bytes(), "'{}': {} bytes for {}", name,
                 a.data->size(), st.type.ToString());
  }
  // Tiller's manifest, when the checkpoint has one: every tensor as saved.
  std::optional<nlohmann::json> manifest;
  const std::string manifest_path = ManifestPath(path_prefix);
  if (Exists(manifest_path)) {
    std::ifstream in(manifest_path);
    try {
      manifest = nlohmann::json::parse(in);
      for (const nlohmann::json& t : manifest->at("tensors")) {
        const std::string name = t.at("name").get<std::string>();
        auto it = values.find(name);
        if (it == values.end())
          Fail(ErrorKind::kDataLoss,
               "checkpoint '{}': tensor '{}' of its manifest is in neither file (a torn or mixed "
               "checkpoint)",
               path_prefix, name);
        const paddle::PickledArray& a = it->second;
        const std::string hash =
            ContentHashHex({reinterpret_cast<const std::byte*>(a.data->data()), a.data->size()});
        // The bytes and their dtype (a reshaped copy of the same array
        // loads, as Paddle's checkpoints do).
        if (a.dtype != t.at("dtype").get<std::string>() || hash != t.at("hash").get<std::string>())
          Fail(ErrorKind::kDataLoss,
               "checkpoint '{}': tensor '{}' does not match the manifest ({} hash {}, recorded "
               "{} hash {}): the file is corrupt, torn or from another save",
               path_prefix, name, a.dtype, hash, t.at("dtype").get<std::string>(),
               t.at("hash").get<std::string>());
      }
      manifest->at("step").get<int64_t>();
    } catch (const nlohmann::json::exception& e) {
      Fail(ErrorKind::kDataLoss, "checkpoint manifest '{}' is corrupt: {}", manifest_path,
           e.what());
    }
  }
  return {std::move(values), std::move(manifest)};
}

CheckpointFiles ReadNewestCheckpoint(const std::string& path_prefix,
                                     const std::vector<std::string>& names,
                                     const StateMap& states) {
  if (!Exists(SavingMark(path_prefix))) return ReadCheckpoint(path_prefix, names, states);
  // A save was interrupted: the main files are whole only if it stopped
  // after its manifest; else the previous checkpoint is.
  try {
    return ReadSavedCheckpoint(path_prefix, names, states);
  } catch (const Error& e) {
    const std::string previous = PreviousPrefix(path_prefix);
    if (!Exists(previous + ".pdparams")) throw;
    CheckpointFiles files = ReadCheckpoint(previous, names, states);
    std::fprintf(stderr,
                 "tiller: checkpoint '%s': the last save to it was interrupted (%s); loaded "
                 "the checkpoint before it ('%s.*')\n",
                 path_prefix.c_str(), e.what(), previous.c_str());
    return files;
  }
}

void WriteCheckpoint(const std::string& path_prefix, const std::vector<paddle::ArrayView>& params,
                     const std::vector<paddle::ArrayView>& opts, const CheckpointCounters& counters,
                     const std::vector<std::string>& names, const StateMap& states) {
  std::filesystem::path dir = std::filesystem::path(path_prefix).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
      Fail(ErrorKind::kNotFound, "checkpoint '{}': cannot create directory '{}': {}", path_prefix,
           dir.string(), ec.message());
  }
  SaveCheckpointFiles(path_prefix, params, opts, counters, names, states);
}

}  // namespace tiller::runtime

namespace tiller::training {

void TrainingSession::SaveCheckpoint(const std::string& path_prefix) const {
  impl_->GatherParts();
  const Impl& s = *impl_;
  s.RequireStateSet("SaveCheckpoint()");
  std::vector<paddle::ArrayView> params, opts;
  std::list<AlignedBuffer> widened;  // float16-stored accumulators, as declared
  for (const std::string& name : s.info.state) {
    const paddle::StateVariable* v = s.Role(name);
    if (!v || v->file == paddle::SaveFile::kNone) continue;
    const runtime::StateTensor& st = s.states.at(name);
    const std::byte* bytes = reinterpret_cast<const std::byte*>(st.data.data());
    if (st.declared != st.type.dtype) {
      widened.emplace_back().Resize(st.declared_type().bytes());
      st.Load(widened.back().data());
      bytes = reinterpret_cast<const std::byte*>(widened.back().data());
    }
    paddle::ArrayView view{
        name, paddle::NumpyNameOf(st.declared), st.type.shape, {bytes, st.declared_type().bytes()}};
    (v->file == paddle::SaveFile::kPdparams ? params : opts).push_back(view);
  }
  runtime::CheckpointCounters counters;
  counters.step = s.steps;
  counters.replicas = s.GroupSize();
  counters.accumulation_factor = s.options.accumulation.factor;
  counters.random_seed = s.options.random_seed;
  counters.loss_scaling = s.replicas[0].loss_scaling;
  // Across processes every process holds the same state (gathered above):
  // rank 0 alone writes.
  s.OnRankZero(fmt::format("checkpoint '{}'", path_prefix), [&] {
    runtime::WriteCheckpoint(path_prefix, params, opts, counters, s.info.state, s.states);
  });
}

void TrainingSession::LoadCheckpoint(const std::string& path_prefix) {
  Impl& s = *impl_;
  s.GatherParts();  // a refused checkpoint leaves the state as it was
  // Across processes rank 0 reads it (the files need only be on its disk)
  // and every process takes rank 0's state.
  s.OnRankZero(fmt::format("checkpoint '{}'", path_prefix), [&] {
    s.ApplyCheckpoint(runtime::ReadNewestCheckpoint(path_prefix, s.info.state, s.states));
  });
  if (s.process_group) {
    s.BroadcastStates(/*loaded=*/true);
    // The manifest's counters, as rank 0 read them.
    s.process_group->Broadcast(0, &s.steps, sizeof s.steps);
    for (Impl::Replica& r : s.replicas) {
      runtime::LossScaling& l = r.loss_scaling;
      s.process_group->Broadcast(0, &l.scale, sizeof l.scale);
      s.process_group->Broadcast(0, &l.good_updates, sizeof l.good_updates);
      s.process_group->Broadcast(0, &l.bad_updates, sizeof l.bad_updates);
      s.process_group->Broadcast(0, &l.skipped, sizeof l.skipped);
    }
  }
  s.replicas_stale = true;
}

void TrainingSession::Impl::ApplyCheckpoint(const runtime::CheckpointFiles& files) {
  Impl& s = *this;
  const std::optional<nlohmann::json>& manifest = files.manifest;
  for (const std::string& name : s.info.state) {
    const paddle::PickledArray& a = files.values.at(name);
    runtime::StateTensor& st = s.states.at(name);
    st.Store(a.data->data());
    st.set = true;
  }
  if (manifest) {
    // The run goes on where it was: dropout masks, loss scaling.
    s.steps = manifest->at("step").get<int64_t>();
    const nlohmann::json& ls = manifest->at("loss_scaling");
    for (Replica& r : s.replicas) {
      r.loss_scaling.scale = ls.at("scale").get<double>();
      r.loss_scaling.good_updates = ls.at("good_updates").get<int>();
      r.loss_scaling.bad_updates = ls.at("bad_updates").get<int>();
      r.loss_scaling.skipped = ls.at("skipped").get<int64_t>();
    }
  }
  s.replicas_stale = true;
}

}  // namespace tiller::training
