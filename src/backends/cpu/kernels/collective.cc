// Collective ops on CPU devices: the device's replica group does the work
// (backend/collective.h); the kernel hands it the op's buffers.
#include "backend/collective.h"

#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernel.h"
#include "core/error.h"

namespace tiller::cpu {
namespace {

// The device's replica group, checked against what the op asks for.
backend::Collective* Group(const ir::Op& op, const backend::Device& device) {
  backend::Collective* group = device.replica_group();
  if (!group)
    Fail(ErrorKind::kUnimplemented, "{} ({}) on {}: the device belongs to no replica group",
         op.type, op.name, device.name());
  if (!op.GetInts("group").empty())
    Fail(ErrorKind::kUnimplemented, "{} ({}): a sub-group of the replicas", op.type, op.name);
  return group;
}

// Sum or mean (as a scale of the sum).
double ReductionScale(const ir::Op& op, const backend::Collective& group) {
  const std::string& reduction = op.GetStr("reduction");
  if (reduction != "sum" && reduction != "mean")
    Fail(ErrorKind::kUnimplemented, "{} ({}): reduction '{}' (sum or mean)", op.type, op.name,
         reduction);
  return op.GetFloat("scale") / (reduction == "mean" ? group.size() : 1);
}

// reduce_scatter / all_gather between the parts of one-dimensional tensors
// (the sharding pass flattens what it shards): the group splits elements,
// so only then are its parts the op's rows.
void CheckParts(const ir::Op& op, const backend::Device& device, const backend::Collective& group) {
  if (op.inputs[0]->rank() != 1 || op.GetInt("axis") != 0)
    Fail(ErrorKind::kUnimplemented, "{} ({}): parts of a one-dimensional tensor (got {}, axis {})",
         op.type, op.name, op.inputs[0]->type.ToString(), op.GetInt("axis"));
  if (op.GetInt("parts") != group.size() || op.GetInt("rank") != device.replica_rank())
    Fail(ErrorKind::kInternal, "{} ({}): part {} of {} on replica {} of {}", op.type, op.name,
         op.GetInt("rank"), op.GetInt("parts"), device.replica_rank(), group.size());
}

// The byte sizes of `values`, and the elements of all of them.
std::vector<size_t> ByteSizes(const std::vector<ir::Value*>& values, int64_t* elements) {
  std::vector<size_t> bytes;
  *elements = 0;
  for (const ir::Value* v : values) {
    bytes.push_back(v->bytes());
    *elements += NumElements(v->shape());
  }
  return bytes;
}

// A bucket's tensors packed one after another into `message`, and back.
void Pack(const std::vector<size_t>& bytes, const std::vector<const void*>& from,
          std::byte* message) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::memcpy(message, from[i], bytes[i]);
    message += bytes[i];
  }
}
void Unpack(const std::vector<size_t>& bytes, const std::byte* message,
            const std::vector<void*>& to) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::memcpy(to[i], message, bytes[i]);
    message += bytes[i];
  }
}

// One input: reduced where it lies. Several (a bucket): packed into the
// workspace, reduced as one message, unpacked; the sums are those of one
// all-reduce per input (elementwise, in rank order, then scaled).
std::unique_ptr<Kernel> MakeAllReduce(const ir::Op& op, backend::Device& device) {
  backend::Collective* group = Group(op, device);
  const double scale = ReductionScale(op, *group);
  const int rank = device.replica_rank();
  const DType dtype = op.inputs[0]->dtype();
  int64_t total = 0;
  const std::vector<size_t> bytes = ByteSizes(op.inputs, &total);
  if (bytes.size() == 1)
    return std::make_unique<LambdaKernel>(
        [group, rank, total, dtype, scale](const KernelArgs& args) {
          group->AllReduceSum(rank, args.inputs[0], args.outputs[0], total, dtype, scale);
        });
  return std::make_unique<LambdaKernel>(
      [group, rank, bytes, total, dtype, scale](const KernelArgs& args) {
        auto* packed = static_cast<std::byte*>(args.workspace);
        Pack(bytes, args.inputs, packed);
        group->AllReduceSum(rank, packed, packed, total, dtype, scale);
        Unpack(bytes, packed, args.outputs);
      },
      static_cast<size_t>(total) * DTypeSize(dtype));
}

// all_reduce_start / all_reduce_wait: one reduction in flight between a
// pair of kernels (keyed by the start op, which the wait op reads), run on
// the device's collective stream while the device computes.
struct InFlight {
  std::mutex mu;
  std::condition_variable cv;
  bool done = true;
  std::exception_ptr error;

  void Wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  }
};

std::shared_ptr<InFlight> InFlightOf(const ir::Op* start) {
  static std::mutex mu;
  static std::map<const ir::Op*, std::weak_ptr<InFlight>> pairs;
  std::lock_guard<std::mutex> lock(mu);
  for (auto it = pairs.begin(); it != pairs.end();)  // drop the pairs of freed kernels
    it = it->second.expired() ? pairs.erase(it) : std::next(it);
  std::weak_ptr<InFlight>& slot = pairs[start];
  std::shared_ptr<InFlight> state = slot.lock();
  if (!state) slot = state = std::make_shared<InFlight>();
  return state;
}

// Packs the inputs into the message (its output) and hands the reduction
// to the collective stream; a later run's start waits for the earlier
// reduction first (its wait has read it by then), and so does the kernel's
// destructor, so the stream never writes into freed storage.
class AllReduceStartKernel : public Kernel {
 public:
  AllReduceStartKernel(std::shared_ptr<InFlight> state, WorkerStream& stream,
                       backend::Collective* group, int rank, std::vector<size_t> bytes,
                       int64_t total, DType dtype, double scale)
      : state_(std::move(state)),
        stream_(stream),
        group_(group),
        rank_(rank),
        bytes_(std::move(bytes)),
        total_(total),
        dtype_(dtype),
        scale_(scale) {}
  ~AllReduceStartKernel() override { state_->Wait(); }

  void Run(const KernelArgs& args) override {
    state_->Wait();
    auto* message = static_cast<std::byte*>(args.outputs[0]);
    Pack(bytes_, args.inputs, message);
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->done = false;
      state_->error = nullptr;
    }
    stream_.Submit([state = state_, group = group_, rank = rank_, message, total = total_,
                    dtype = dtype_, scale = scale_] {
      std::exception_ptr error;
      try {
        group->AllReduceSum(rank, message, message, total, dtype, scale);
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(state->mu);
      state->error = error;
      state->done = true;
      state->cv.notify_all();
    });
  }

 private:
  std::shared_ptr<InFlight> state_;
  WorkerStream& stream_;
  backend::Collective* group_;
  const int rank_;
  const std::vector<size_t> bytes_;
  const int64_t total_;
  const DType dtype_;
  const double scale_;
};

std::unique_ptr<Kernel> MakeAllReduceStart(const ir::Op& op, backend::Device& device) {
  backend::Collective* group = Group(op, device);
  const double scale = ReductionScale(op, *group);
  int64_t total = 0;
  std::vector<size_t> bytes = ByteSizes(op.inputs, &total);
  return std::make_unique<AllReduceStartKernel>(
      InFlightOf(&op), CpuDeviceOf(device).collective_stream(), group, device.replica_rank(),
      std::move(bytes), total, op.inputs[0]->dtype(), scale);
}

// Waits for its start's reduction (rethrowing its error), then unpacks the
// message into the outputs.
std::unique_ptr<Kernel> MakeAllReduceWait(const ir::Op& op, backend::Device& device) {
  const ir::Op* start = op.inputs[0]->producer;
  TILLER_CHECK(start && start->is(ir::Opcode::all_reduce_start),
               "{} ({}) reads no all_reduce_start", op.type, op.name);
  std::shared_ptr<InFlight> state = InFlightOf(start);
  int64_t total = 0;
  const std::vector<size_t> bytes = ByteSizes(op.outputs, &total);
  return std::make_unique<LambdaKernel>([state, bytes](const KernelArgs& args) {
    state->Wait();
    if (state->error) std::rethrow_exception(state->error);
    Unpack(bytes, static_cast<const std::byte*>(args.inputs[0]), args.outputs);
  });
}

std::unique_ptr<Kernel> MakeReduceScatter(const ir::Op& op, backend::Device& device) {
  backend::Collective* group = Group(op, device);
  const double scale = ReductionScale(op, *group);
  CheckParts(op, device, *group);
  const int rank = device.replica_rank();
  const int64_t count = NumElements(op.inputs[0]->shape());
  const DType dtype = op.inputs[0]->dtype();
  return std::make_unique<LambdaKernel>([group, rank, count, dtype, scale](const KernelArgs& args) {
    group->ReduceScatterSum(rank, args.inputs[0], args.outputs[0], count, dtype, scale);
  });
}

std::unique_ptr<Kernel> MakeAllGather(const ir::Op& op, backend::Device& device) {
  backend::Collective* group = Group(op, device);
  CheckParts(op, device, *group);
  const int rank = device.replica_rank();
  const int64_t count = NumElements(op.outputs[0]->shape());
  const DType dtype = op.inputs[0]->dtype();
  return std::make_unique<LambdaKernel>([group, rank, count, dtype](const KernelArgs& args) {
    group->AllGather(rank, args.inputs[0], args.outputs[0], count, dtype);
  });
}

// The group of a row collective (gather_rows, exchange_rows), whose parts
// and rank the op must agree with.
backend::Collective* RowGroup(const ir::Op& op, const backend::Device& device) {
  backend::Collective* group = Group(op, device);
  if (op.GetInt("parts") != group->size() || op.GetInt("rank") != device.replica_rank())
    Fail(ErrorKind::kInternal, "{} ({}): part {} of {} on replica {} of {}", op.type, op.name,
         op.GetInt("rank"), op.GetInt("parts"), device.replica_rank(), group->size());
  return group;
}

// Reports the ids (operand `operand`, n of them) outside [0, vocab).
void CheckIds(const KernelArgs& args, const void* ids, bool ids64, int64_t n, int64_t vocab,
              int operand) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = backend::RowId(ids, ids64, i);
    if (id < 0 || id >= vocab) RecordIndexFault(args, id, vocab, operand);
  }
}

// The lookups of gather_rows: each table's ids checked here (an id outside
// the table is reported, naming its operand, and reads as zeros), then one
// meeting of the replicas moves every table's rows.
class GatherRowsKernel : public Kernel {
 public:
  GatherRowsKernel(const ir::Op& op, backend::Collective* group, int rank)
      : group_(group), rank_(rank) {
    const std::vector<int64_t>& vocabs = op.GetInts("vocabs");
    const std::vector<int64_t>& padding = op.GetInts("padding_rows");
    for (size_t t = 0; t < vocabs.size(); ++t) {
      backend::RowLookup l;
      l.ids64 = op.input(2 * t + 1)->dtype() == DType::kI64;
      l.n = NumElements(op.input(2 * t + 1)->shape());
      l.vocab = vocabs[t];
      l.padding_row = padding[t];
      l.row_bytes = op.output(t)->bytes() / static_cast<size_t>(std::max<int64_t>(l.n, 1));
      lookups_.push_back(l);
    }
    workspace_ = group_->GatherRowsWorkspace(lookups_);
  }
  size_t workspace_bytes() const override { return workspace_; }

  void Run(const KernelArgs& args) override {
    for (size_t t = 0; t < lookups_.size(); ++t) {
      backend::RowLookup& l = lookups_[t];
      l.part = args.inputs[2 * t];
      l.ids = args.inputs[2 * t + 1];
      l.out = args.outputs[t];
      CheckIds(args, l.ids, l.ids64, l.n, l.vocab, static_cast<int>(2 * t + 1));
    }
    group_->GatherRows(rank_, lookups_, args.workspace);
  }

 private:
  backend::Collective* group_;
  const int rank_;
  std::vector<backend::RowLookup> lookups_;
  size_t workspace_ = 0;
};

std::unique_ptr<Kernel> MakeGatherRows(const ir::Op& op, backend::Device& device) {
  return std::make_unique<GatherRowsKernel>(op, RowGroup(op, device), device.replica_rank());
}

// exchange_rows: each table's ids checked (an id outside the table is
// reported: the exchange drops it), then one meeting of the replicas.
class ExchangeRowsKernel : public Kernel {
 public:
  ExchangeRowsKernel(const ir::Op& op, backend::Collective* group, int rank)
      : group_(group), rank_(rank) {
    const std::vector<int64_t>& vocabs = op.GetInts("vocabs");
    const std::vector<double>& scales = op.GetFloats("scales");
    for (size_t t = 0; t < vocabs.size(); ++t) {
      backend::RowGradientPart p;
      p.scale = static_cast<float>(scales[t]);
      p.ids64 = op.input(2 * t)->dtype() == DType::kI64;
      p.n = op.input(2 * t)->shape()[0];
      p.vocab = vocabs[t];
      p.row_bytes = static_cast<size_t>(op.input(2 * t + 1)->shape()[1]) * sizeof(float);
      parts_.push_back(p);
    }
    workspace_ = group_->ExchangeRowsWorkspace(parts_);
  }
  size_t workspace_bytes() const override { return workspace_; }

  void Run(const KernelArgs& args) override {
    for (size_t t = 0; t < parts_.size(); ++t) {
      backend::RowGradientPart& p = parts_[t];
      p.ids = args.inputs[2 * t];
      p.rows = args.inputs[2 * t + 1];
      p.out_ids = args.outputs[2 * t];
      p.out_rows = args.outputs[2 * t + 1];
      CheckIds(args, p.ids, p.ids64, p.n, p.vocab, static_cast<int>(2 * t));
    }
    group_->ExchangeRows(rank_, parts_, args.workspace);
  }

 private:
  backend::Collective* group_;
  const int rank_;
  std::vector<backend::RowGradientPart> parts_;
  size_t workspace_ = 0;
};

std::unique_ptr<Kernel> MakeExchangeRows(const ir::Op& op, backend::Device& device) {
  return std::make_unique<ExchangeRowsKernel>(op, RowGroup(op, device), device.replica_rank());
}

TILLER_CPU_KERNEL("all_reduce", MakeAllReduce,
                  Signature("T... -> T...").Where("T", {DType::kF32, DType::kF64}));
TILLER_CPU_KERNEL("all_reduce_start", MakeAllReduceStart,
                  Signature("T... -> T").Where("T", {DType::kF32, DType::kF64}));
TILLER_CPU_KERNEL("all_reduce_wait", MakeAllReduceWait,
                  Signature("T -> T...").Where("T", {DType::kF32, DType::kF64}));
TILLER_CPU_KERNEL("reduce_scatter", MakeReduceScatter,
                  Signature("T -> T").Where("T", {DType::kF32, DType::kF64}));
// A gather moves bytes: ids (int32|int64) too, a row gradient's.
TILLER_CPU_KERNEL("all_gather", MakeAllGather,
                  Signature("T -> T").Where("T",
                                            {DType::kF32, DType::kF64, DType::kI32, DType::kI64}));
TILLER_CPU_KERNEL("exchange_rows", MakeExchangeRows,
                  Signature("I, T, *... -> I, T, *...")
                      .Where("I", {DType::kI32, DType::kI64})
                      .Where("T", {DType::kF32}));
TILLER_CPU_KERNEL("gather_rows", MakeGatherRows,
                  Signature("T, I, *... -> T...")
                      .Where("T", {DType::kF32})
                      .Where("I", {DType::kI32, DType::kI64}));

}  // namespace
}  // namespace tiller::cpu
