#include "compile/executable.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "backend/collective.h"
#include "compile/device_profile.h"
#include "compile/placement.h"
#include "compile/processes.h"
#include "compile/trace.h"
#include "core/error.h"
#include "core/memory_cap.h"
#include "core/shape.h"
#include "ir/op_schema.h"
#include "ir/ops/op_helpers.h"

namespace tiller::compile {

namespace {

// "'name' float32[...], 4.0 TB, made by op NAME (TYPE)", for the errors below.
std::string DescribeTensor(const ir::Value& v) {
  std::string out = fmt::format("'{}' {}, {}", v.name, v.type.ToString(),
                                FormatBytes(static_cast<double>(v.bytes())));
  if (v.producer) out += fmt::format(", made by op {} ({})", v.producer->name, v.producer->type);
  return out;
}

// `problem` leads into "more than the memory cap of ...".
[[noreturn]] void RefuseOverCap(const backend::Device& device, const std::string& problem) {
  const size_t cap = device.capacity_bytes();
  Fail(ErrorKind::kResourceExhausted, "{}: {}more than the memory cap of {} ({})", device.name(),
       problem, FormatBytes(static_cast<double>(cap)), MemoryCapOrigin(cap));
}

// Before any kernel exists: kernels size tables from their operands' shapes
// (interp's taps, pad's index maps), so a tensor past the cap on its own is
// refused before they are made, not only once the arena is planned.
void CheckTensorsFit(const ir::Graph& g, int device, const backend::Device& dev) {
  const ir::Value* largest = nullptr;
  for (const auto& op : g.ops()) {
    if (device >= 0 && op->device != device) continue;
    for (const ir::Value* v : op->outputs) {
      if (v && (!largest || v->bytes() > largest->bytes())) largest = v;
    }
  }
  if (largest && largest->bytes() > dev.capacity_bytes())
    RefuseOverCap(dev, fmt::format("the program's tensor {} is alone ", DescribeTensor(*largest)));
}

// A plan larger than the device's memory cap fails before its arena is
// allocated, naming the largest tensor in it: a model asking for absurd
// sizes gets a message instead of an allocation failure.
void CheckArenaFits(const MemoryPlan& plan, const backend::Device& device) {
  if (plan.arena_bytes() <= device.capacity_bytes()) return;
  const ir::Value* largest = nullptr;
  for (const auto& [v, offset] : plan.offset) {
    if (!largest || v->bytes() > largest->bytes()) largest = v;
  }
  RefuseOverCap(device, fmt::format("the program needs {} of memory for its tensors{}: ",
                                    FormatBytes(static_cast<double>(plan.arena_bytes())),
                                    largest ? "; its largest tensor is " + DescribeTensor(*largest)
                                            : std::string()));
}

}  // namespace

std::unique_ptr<Executable> Executable::Build(std::unique_ptr<ir::Graph> graph,
                                              const CompileOptions& options,
                                              const StateStorage& states) {
  Validate(options);
  std::vector<std::unique_ptr<backend::Device>> owned;
  std::vector<backend::Device*> devices;
  for (size_t i = 0; i < options.devices.size(); ++i) {
    const DeviceSpec& spec = options.devices[i];
    backend::Backend* b = backend::FindBackend(spec.backend);
    TILLER_CHECK(b, "no backend '{}'", spec.backend);
    owned.push_back(b->CreateDevice(static_cast<int>(i), DeviceOptionsOf(spec)));
    devices.push_back(owned.back().get());
  }
  PlaceOps(*graph, devices, options.placement);
  InsertCopies(*graph, HostDevice(devices), HostMemoryDevices(devices));
  auto exe = BuildPlaced(std::move(graph), devices, states);
  exe->owned_devices_ = std::move(owned);
  return exe;
}

Executable::~Executable() {
  // Kernels may hold device resources: release them before the devices.
  steps_.clear();
  arenas_.clear();
  uploads_.clear();
}

std::unique_ptr<Executable> Executable::BuildPlaced(std::unique_ptr<ir::Graph> graph,
                                                    const std::vector<backend::Device*>& devices,
                                                    const StateStorage& states, bool plan_only) {
  auto exe = std::unique_ptr<Executable>(new Executable());
  exe->devices_ = devices;
  exe->graph_ = std::move(graph);
  const ir::Graph& g = *exe->graph_;
  const int n = static_cast<int>(devices.size());
  const int host = HostDevice(devices);
  exe->host_ = host;
  VerifyPlacement(g, n, host, HostMemoryDevices(devices));

  for (const auto& op : g.ops()) {
    Step step;
    step.op = op.get();
    step.device = op->device;
    step.copy = op->is(ir::Opcode::copy);
    step.send = op->is(ir::Opcode::send);
    step.recv = op->is(ir::Opcode::recv);
    // A run without the update phase must not skip what the other phases
    // read.
    if (op->placement.phase != ir::Phase::kUpdate) {
      for (const ir::Value* in : op->inputs) {
        TILLER_CHECK(!in || !in->producer || in->producer->placement.phase != ir::Phase::kUpdate,
                     "op {} ({}, {} phase) reads %{} of update op {}", op->type, op->name,
                     ir::PhaseName(op->placement.phase), in->id, in->producer->type);
      }
    }
    exe->steps_.push_back(std::move(step));
  }
  // Kernels are created on their device's stream: creation decides how work
  // is split (oneDNN picks its decomposition for the thread count of the
  // creating thread), so it must see the device's own threads.
  //
  // A constant that every reader copied when it was created (prepacked
  // weights) is dropped from the graph as soon as its last reader exists:
  // where nothing else holds the bytes (a predictor lets go of what it
  // loaded, runtime/predictor.cc), they are freed before the next weight is
  // packed, so the peak holds each weight once.
  std::unordered_map<ir::Value*, int> readers;
  std::unordered_set<const ir::Value*> released;
  for (const Step& s : exe->steps_) {
    for (ir::Value* in : s.op->inputs) {
      if (in && in->has_bytes()) ++readers[in];
    }
  }
  for (const auto& [name, v] : g.outputs()) readers.erase(v);
  for (int d = 0; d < n && !plan_only; ++d) CheckTensorsFit(g, n == 1 ? -1 : d, *devices[d]);
  for (int d = 0; d < n; ++d) {
    backend::Device& dev = *devices[d];
    dev.stream().Submit([&exe, &dev, &readers, &released, d] {
      for (Step& s : exe->steps_) {
        if (s.device != d || s.copy || s.send || s.recv || s.op->schema->is_view) continue;
        s.kernel = dev.backend().CreateKernel(*s.op, dev);
        for (size_t i = 0; i < s.op->inputs.size(); ++i) {
          auto it = readers.find(s.op->inputs[i]);
          if (it == readers.end() || s.kernel->ReadsInput(i)) continue;
          if (--it->second > 0) continue;
          it->first->data.reset();
          released.insert(it->first);
        }
      }
    });
    dev.stream().Synchronize();
  }
  exe->SetLenders(std::vector<bool>(n, true));
  std::vector<size_t> workspace;
  for (const Step& s : exe->steps_) workspace.push_back(s.kernel ? s.kernel->workspace_bytes() : 0);
  // One arena per device; a single device plans every value (views included).
  for (int d = 0; d < n; ++d) {
    exe->plans_.push_back(PlanMemory(g, workspace, n == 1 ? -1 : d, host));
    if (plan_only) continue;
    CheckArenaFits(exe->plans_.back(), *devices[d]);
    exe->arenas_.push_back(devices[d]->Allocate(exe->plans_.back().arena_bytes()));
  }
  if (plan_only) {
    exe->plan_only_ = true;
    return exe;
  }
  const MemoryPlan& host_plan = exe->plans_[host];

  // Weights and constants that a device without host access reads, uploaded
  // once: (value, device) -> device address.
  std::map<std::pair<const ir::Value*, int>, void*> uploaded;
  auto address = [&](const ir::Value* v, int device) -> void* {
    auto alias = host_plan.alias_of.find(v);
    const ir::Value* r = alias == host_plan.alias_of.end() ? v : alias->second;
    // A constant let go of above: only kernels that copied it read it.
    if (released.count(r)) return nullptr;
    if (r->data) {
      void* bytes = const_cast<std::byte*>(r->data->data());
      if (devices[device]->host_accessible()) return bytes;
      auto [it, fresh] = uploaded.try_emplace({r, device}, nullptr);
      if (fresh) {
        exe->uploads_.push_back(devices[device]->Allocate(r->bytes()));
        devices[device]->CopyFromHost(exe->uploads_.back()->data(), bytes, r->bytes());
        it->second = exe->uploads_.back()->data();
      }
      return it->second;
    }
    auto in_state = host_plan.in_state.find(r);
    if (in_state != host_plan.in_state.end()) r = in_state->second;
    if (r->kind == ir::ValueKind::kState) {
      auto it = states.find(r->name);
      TILLER_CHECK(it != states.end() && it->second, "state '{}' has no storage", r->name);
      return it->second;
    }
    int home = HomeDevice(r, host);
    const MemoryPlan& own = exe->plans_[home];
    auto it = own.offset.find(r);
    TILLER_CHECK(it != own.offset.end(), "value %{} ({}) has no address on device {}", r->id,
                 r->name, home);
    return static_cast<std::byte*>(exe->arenas_[home]->data()) + it->second;
  };
  for (Step& s : exe->steps_) {
    int d = s.device;
    for (const ir::Value* in : s.op->inputs) {
      // A copy reads its input where the input lives.
      int where = s.copy ? HomeDevice(in, host) : d;
      s.args.inputs.push_back(in ? address(in, where) : nullptr);
    }
    for (const ir::Value* out : s.op->outputs) s.args.outputs.push_back(address(out, d));
    s.args.workspace =
        static_cast<std::byte*>(exe->arenas_[d]->data()) + exe->plans_[d].tensor_bytes;
    s.args.stream = &devices[d]->stream();
    s.index_fault = std::make_unique<backend::IndexFault>();
    s.args.index_fault = s.index_fault.get();
  }
  std::map<const ir::Op*, size_t> segment_of;
  bool receiving = false;  // the current segment has only received so far
  for (size_t i = 0; i < exe->steps_.size(); ++i) {
    const ir::Op* op = exe->steps_[i].op;
    const int d = exe->steps_[i].device;
    // A view runs nothing: it joins the segment it falls in, whatever the
    // device its bytes are on (views before the first other step join the
    // first segment).
    if (op->schema->is_view && i + 1 < exe->steps_.size()) {
      if (exe->segments_.empty()) {
        segment_of[op] = 0;
        continue;
      }
    } else if (exe->segments_.empty() || exe->segments_.back().device != d ||
               exe->segment_info_.back().phase != op->placement.phase ||
               (exe->steps_[i].recv && !receiving)) {
      // A recv begins a segment (after any recv it follows): a segment waits
      // for other processes only before it starts (SegmentArrived).
      exe->segments_.push_back({d, exe->segments_.empty() ? 0 : i, i});
      exe->segment_info_.push_back({d, op->placement.phase});
      exe->segment_recvs_.emplace_back();
      receiving = exe->steps_[i].recv;
    }
    if (!op->schema->is_view && !exe->steps_[i].recv) receiving = false;
    if (receiving && exe->steps_[i].recv) exe->segment_recvs_.back().push_back(i);
    exe->segments_.back().end = i + 1;
    segment_of[op] = exe->segments_.size() - 1;
  }
  for (const ir::Value* in : g.inputs())
    exe->inputs_.push_back({in->name, in->type, address(in, host)});
  for (const auto& [name, v] : g.outputs())
    exe->outputs_.push_back({name, v->type, address(v, host)});
  for (const auto& [v, state] : host_plan.copy_back) {
    const bool update = v->producer && v->producer->placement.phase == ir::Phase::kUpdate;
    const size_t segment = v->producer ? segment_of.at(v->producer) : 0;
    exe->copy_back_.push_back(
        {address(v, host), address(state, host), state->bytes(), update, segment});
  }
  return exe;
}

void Executable::SetLenders(const std::vector<bool>& lends) {
  TILLER_CHECK(lends.size() == devices_.size(), "{} lenders for {} devices", lends.size(),
               devices_.size());
  lent_threads_.clear();
  for (size_t d = 0; d < devices_.size(); ++d) {
    int threads = 0;
    for (size_t o = 0; o < devices_.size(); ++o) {
      const backend::Device* other = devices_[o];
      if (&other->backend() == &devices_[d]->backend() && other->host_accessible() && lends[o])
        threads += other->threads();
    }
    lent_threads_.push_back(std::max(threads, devices_[d]->threads()));
  }
}

size_t Executable::arena_bytes() const {
  size_t total = 0;
  for (const MemoryPlan& p : plans_) total += p.arena_bytes();
  return total;
}

int64_t Executable::MessageTag(const Step& s) const {
  return round_ * kTransfersPerRound + s.op->GetInt("tag");
}

bool Executable::SegmentArrived(size_t j) const {
  for (size_t i : segment_recvs_.at(j)) {
    const Step& s = steps_[i];
    if (!link_->Arrived(static_cast<int>(s.op->GetInt("peer")), MessageTag(s))) return false;
  }
  return true;
}

void Executable::RunStep(size_t i) {
  Step& s = steps_[i];
  if (s.send || s.recv) {
    TILLER_CHECK(link_, "{} ({}) has no process link", s.op->type, s.op->name);
    const int peer = static_cast<int>(s.op->GetInt("peer"));
    if (s.send)
      link_->Send(peer, MessageTag(s), s.args.inputs[0], s.op->inputs[0]->bytes());
    else
      link_->Recv(peer, MessageTag(s), s.args.outputs[0], s.op->outputs[0]->bytes());
    return;
  }
  if (s.copy) {
    const ir::Value* in = s.op->inputs[0];
    backend::Device& from = *devices_[HomeDevice(in, host_)];
    devices_[s.device]->CopyFrom(from, s.args.inputs[0], s.args.outputs[0], in->bytes());
    return;
  }
  if (!s.kernel) return;
  s.kernel->Run(s.args);
  if (s.index_fault->hit()) {
    s.index_fault->Clear();  // the next run starts clean
    backend::FailIndexFault(*s.op, *s.args.index_fault);
  }
  if (check_nan_inf_ || (!guarded_step_.empty() && guarded_step_[i]))
    CheckFinite(s, !check_nan_inf_);
}

void Executable::RunSegment(const Segment& seg) {
  if (!profiling_ && !trace_) {
    for (size_t i = seg.begin; i < seg.end; ++i) RunStep(i);
    return;
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (size_t i = seg.begin; i < seg.end; ++i) {
    const auto t0 = Clock::now();
    RunStep(i);
    const auto t1 = Clock::now();
    if (profiling_) step_ms_[i] += std::chrono::duration<double, std::milli>(t1 - t0).count();
    const Step& s = steps_[i];
    if (trace_ && (s.copy || s.send || s.recv || ir::IsCollective(*s.op))) {
      trace_->Add(s.copy ? trace_copies_ : trace_collectives_,
                  fmt::format("{} {}", s.op->type, trace_tag_), s.op->type.c_str(), t0, t1);
    }
  }
  if (trace_) {
    const SegmentInfo& info = segment_info_[static_cast<size_t>(&seg - segments_.data())];
    trace_->Add(trace_devices_[seg.device],
                fmt::format("{} {}", ir::PhaseName(info.phase), trace_tag_),
                ir::PhaseName(info.phase), start, Clock::now());
  }
}

void Executable::Run(RunPart part) {
  TILLER_CHECK(!plan_only_, "an executable built only for its memory plan cannot run");
  // Segments run one after another (each may read the previous one's
  // results); each on its device's stream, with that device's threads.
  // The other devices idle meanwhile: those of the same backend lend it
  // their threads (lent_threads_).
  for (size_t j = 0; j < segments_.size(); ++j) {
    const Segment& seg = segments_[j];
    if (LeavesOut(part, segment_info_[j].phase == ir::Phase::kUpdate)) continue;
    backend::Stream& stream = devices_[seg.device]->stream();
    stream.SubmitWithThreads([this, &seg] { RunSegment(seg); }, lent_threads_[seg.device]);
    stream.Synchronize();
  }
  CopyBack(part);
  if (profiling_) ++profiled_runs_;
}

int Executable::GuardFinite(const ir::Value* v, const std::string& label) {
  // A view (reshape) runs no step: its bytes are its source's, checked
  // where they are written. (A replica's own row gradient is the reshape of
  // its lookups' gradient rows: unguarded before, it was checked only once
  // exchanged.)
  while (v && v->producer && v->producer->schema->is_view && !v->producer->inputs.empty())
    v = v->producer->inputs[0];
  for (size_t i = 0; i < steps_.size(); ++i) {
    const auto& outs = steps_[i].op->outputs;
    for (size_t o = 0; o < outs.size(); ++o) {
      if (outs[o] != v || !steps_[i].kernel) continue;
      guarded_step_.resize(steps_.size(), false);
      guarded_step_[i] = true;
      guard_labels_[{i, o}] = label;
      return static_cast<int>(i);
    }
  }
  return -1;
}

// The index of the first NaN or infinity of p[0, n), or -1. A training
// step checks every gradient (GuardFinite): 110M floats for BERT-Base, so
// blocks are tested branch-free (all exponent bits set: the loop
// vectorizes) and only a block holding one is searched element by element.
template <typename T, typename Bits>
int64_t FirstNonFinite(const T* p, int64_t n) {
  static_assert(sizeof(T) == sizeof(Bits));
  constexpr Bits kExponent = sizeof(T) == 4 ? Bits(0x7f800000u) : Bits(0x7ff0000000000000ull);
  constexpr int64_t kBlock = 1024;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    Bits hit = 0;
    for (int64_t i = b; i < e; ++i)
      hit |= Bits((std::bit_cast<Bits>(p[i]) & kExponent) == kExponent);
    if (!hit) continue;
    for (int64_t i = b; i < e; ++i) {
      if (!std::isfinite(p[i])) return i;
    }
  }
  return -1;
}

// Scans the float outputs of a step, or only its guarded ones.
void Executable::CheckFinite(const Step& s, bool guarded_only) const {
  if (!devices_[s.device]->host_accessible()) return;
  // A reduction in flight writes its message on the collective stream: its
  // wait's outputs are checked instead.
  if (s.op->is(ir::Opcode::all_reduce_start)) return;
  size_t index = static_cast<size_t>(&s - steps_.data());
  for (size_t o = 0; o < s.op->outputs.size(); ++o) {
    const ir::Value* v = s.op->outputs[o];
    if (guarded_only && !guard_labels_.count({index, o})) continue;
    if (v->dtype() != DType::kF32 && v->dtype() != DType::kF64) continue;
    const int64_t n = NumElements(v->shape());
    int64_t bad = -1;
    double value = 0;
    if (v->dtype() == DType::kF32) {
      const float* p = static_cast<const float*>(s.args.outputs[o]);
      bad = FirstNonFinite<float, uint32_t>(p, n);
      if (bad >= 0) value = p[bad];
    } else {
      const double* p = static_cast<const double*>(s.args.outputs[o]);
      bad = FirstNonFinite<double, uint64_t>(p, n);
      if (bad >= 0) value = p[bad];
    }
    if (bad < 0) continue;
    std::string what = fmt::format("op {} ({}) wrote {} into output {} ({}) at element {}",
                                   s.op->type, s.op->name, value, o, v->type.ToString(), bad);
    auto label = guard_labels_.find({index, o});
    if (label != guard_labels_.end())
      what = fmt::format("{} is not finite: {}", label->second, what);
    Fail(ErrorKind::kNonFinite, "{}", what);
  }
}

void Executable::SetTrace(TraceRecorder* trace, const std::string& lane_prefix) {
  trace_ = trace;
  trace_devices_.clear();
  if (!trace) return;
  for (const backend::Device* d : devices_)
    trace_devices_.push_back(trace->Lane(lane_prefix + d->name()));
  trace_copies_ = trace->Lane(lane_prefix + "copies");
  trace_collectives_ = trace->Lane(lane_prefix + "collectives");
}

void Executable::RunSegmentHere(size_t j) {
  RunSegment(segments_.at(j));
  for (const Copy& c : copy_back_) {
    if (c.segment == j && c.from != c.to) std::memcpy(c.to, c.from, c.bytes);
  }
}

void Executable::CopyBack(RunPart part) {
  for (const Copy& c : copy_back_) {
    if (LeavesOut(part, c.update)) continue;
    if (c.from != c.to) std::memcpy(c.to, c.from, c.bytes);
  }
}

std::vector<Executable::StepTime> Executable::StepTimes() const {
  std::vector<StepTime> out;
  out.reserve(steps_.size());
  for (size_t i = 0; i < steps_.size(); ++i) {
    const double total = i < step_ms_.size() ? step_ms_[i] : 0.0;
    out.push_back(
        {steps_[i].op, profiled_runs_ > 0 ? total / static_cast<double>(profiled_runs_) : 0.0});
  }
  return out;
}

std::vector<Executable::ProfileEntry> Executable::Profile(bool by_shape) const {
  std::map<std::string, ProfileEntry> by_type;
  for (size_t i = 0; i < step_ms_.size(); ++i) {
    const ir::Op* op = steps_[i].op;
    std::string key = op->type;
    if (op->is(ir::Opcode::linear) && !op->GetStr("activation").empty())
      key.append("+").append(op->GetStr("activation"));
    if (by_shape)
      for (const ir::Value* in : op->inputs)
        if (in) key.append(" ").append(ShapeToString(in->shape()));
    ProfileEntry& e = by_type[key];
    e.op_type = key;
    e.total_ms += step_ms_[i];
    e.calls += profiled_runs_;
  }
  std::vector<ProfileEntry> out;
  for (auto& [k, e] : by_type) out.push_back(e);
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.total_ms > b.total_ms; });
  return out;
}

}  // namespace tiller::compile
