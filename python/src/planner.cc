// Binding of tiller::planning::Plan (include/tiller/planner.h): tiller.plan().
#include "tiller/planner.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>

#include "bindings.h"

namespace py = pybind11;
using tiller::planning::PlanRequest;

namespace {

py::dict Plan(const std::string& model, bool train, int devices, int replicas, int micro_batch,
              int accumulate, int batches_per_step, const std::string& profile,
              const std::vector<std::string>& feeds,
              const std::map<std::string, std::vector<int64_t>>& shapes, int64_t seq_len,
              bool pipelining, bool fill_drain, int stages_per_device,
              bool replicated_tensor_sharding, int64_t sharding_min_elements, int recompute,
              int threads, const std::string& params, const std::string& precision,
              const std::vector<std::string>& accl_types, int ranks, double rank_link,
              double rank_latency, int64_t all_reduce_bucket_bytes, const std::string& cluster) {
  // A list, not a fixed-size array, in the binding: type stubs spell a
  // list[str] without pybind11-stubgen's own annotation types.
  if (accl_types.size() != 3)
    throw tiller::Error(tiller::ErrorKind::kInvalidArgument,
                        "accl_types takes 3 names (accl1_type, accl2_type, accl3_type), got " +
                            std::to_string(accl_types.size()));
  PlanRequest r;
  r.model = model;
  r.params = params;
  r.train = train;
  r.feeds = feeds;
  r.shapes = shapes;
  r.seq_len = seq_len;
  r.devices = devices;
  r.replicas = replicas;
  r.micro_batch = micro_batch;
  r.accumulation.enabled = accumulate > 1;
  r.accumulation.factor = accumulate;
  r.batches_per_step = batches_per_step;
  r.pipeline.enabled = pipelining;
  if (fill_drain) r.pipeline.schedule = tiller::PipelineSettings::Schedule::kFillDrain;
  r.split.stages_per_device = stages_per_device;
  r.collectives.shard_optimizer_state = replicated_tensor_sharding;
  r.collectives.shard_min_elements = sharding_min_elements;
  r.collectives.all_reduce_bucket_bytes = all_reduce_bucket_bytes;
  r.recompute = tiller::RecomputeSettings::FromAutoRecomputation(recompute);
  r.profile = profile;
  r.threads = threads;
  r.precision.compute = precision;
  std::copy(accl_types.begin(), accl_types.end(), r.precision.accl_types.begin());
  r.ranks = ranks;
  r.rank_link = rank_link;
  r.rank_latency = rank_latency;
  r.cluster = cluster;
  tiller::planning::PlanReport report;
  {
    py::gil_scoped_release release;
    report = tiller::planning::Plan(r);
  }
  py::list per_device;
  for (const auto& d : report.devices) {
    py::dict m;
    m["weights"] = d.weights;
    m["optimizer"] = d.optimizer;
    m["gradients"] = d.gradients;
    m["other"] = d.other;
    m["stash"] = d.stash;
    m["arena"] = d.arena;
    m["half_weight_copies"] = d.half_weight_copies;
    m["in_flight"] = d.in_flight;
    m["peak"] = d.peak;
    m["forward_seconds"] = d.forward_seconds;
    m["backward_seconds"] = d.backward_seconds;
    m["update_seconds"] = d.update_seconds;
    per_device.append(m);
  }
  py::dict out;
  out["text"] = report.text;
  out["devices"] = per_device;
  out["window_seconds"] = report.window_seconds;
  out["run_seconds"] = report.run_seconds;
  out["bubble"] = report.bubble;
  out["collective_seconds"] = report.collective_seconds;
  out["collective_messages"] = report.collective_messages;
  out["profile_memory_bytes"] = report.profile_memory_bytes;
  out["fits"] = report.fits;
  return out;
}

void BindPlanner(py::module_& m) {
  m.def("plan", &Plan, py::arg("model"), py::arg("train") = false, py::arg("devices") = 1,
        py::arg("replicas") = 1, py::arg("micro_batch") = 1, py::arg("accumulate") = 1,
        py::arg("batches_per_step") = 1, py::arg("profile") = "cpu",
        py::arg("feeds") = std::vector<std::string>{},
        py::arg("shapes") = std::map<std::string, std::vector<int64_t>>{}, py::arg("seq_len") = 128,
        py::arg("pipelining") = true, py::arg("fill_drain") = false,
        py::arg("stages_per_device") = 1, py::arg("replicated_tensor_sharding") = true,
        py::arg("sharding_min_elements") = 8192, py::arg("recompute") = 0, py::arg("threads") = 1,
        py::arg("params") = "", py::arg("precision") = "float32",
        py::arg("accl_types") = std::vector<std::string>{"FLOAT", "FLOAT", "FLOAT"},
        py::arg("ranks") = 1, py::arg("rank_link") = 0.0, py::arg("rank_latency") = 0.0,
        py::arg("all_reduce_bucket_bytes") = int64_t{32} << 20, py::arg("cluster") = "",
        "Per-device memory and predicted step time of a configuration on a device profile, "
        "without running the model (what `tiller plan` prints is in 'text'; include/tiller/"
        "planner.h).");
}

TILLER_PY_BINDINGS(BindPlanner);

}  // namespace
