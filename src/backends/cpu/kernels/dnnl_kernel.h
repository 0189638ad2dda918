// The run-time kernels of the oneDNN GEMMs and convolutions, which
// matmul.cc creates: DnnlKernel (one primitive) and BlockedConvKernel (a
// convolution between reorders into and out of oneDNN's layout). Memories
// are bound once (Run() swaps data handles), constant operands packed at
// creation (packed_weights.h) and each kernel may hold a twin built for
// half the worker's team. Also the post-ops of fused activations and
// requantization that both kinds of op append.
#pragma once

#include <omp.h>

#include <algorithm>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cpu/dnnl_context.h"
#include "backends/cpu/kernel.h"
#include "core/aligned_buffer.h"

namespace tiller::cpu {

inline bool IsConstant(const ir::Value* v) {
  return v && v->has_bytes();
}

// Appends the eltwise post-ops of fused activation `act` (passes/fuse_activation.cc
// fuses hard_swish, hard_sigmoid and relu6 only with Paddle's default
// attributes, which these are).
void AppendActivation(dnnl::post_ops& po, const std::string& act, const ir::Op& op);

// An int8 GEMM's result type and its last post-op: with out_scale k > 0
// (fuse_requantize), an eltwise k * y and an s8 result, which oneDNN rounds
// half to even and saturates to [-128, 127] as quantize_linear{qmax 127}
// does k * y; float32 otherwise.
dnnl::memory::data_type AppendRequantize(dnnl::post_ops& po, const ir::Op& op);

// While it lives, this thread's OpenMP team is half of `team`: kernels
// build their half-team primitives in it (oneDNN's primitive cache keys on
// the thread count, and would hand back the full team's).
class HalfTeam {
 public:
  explicit HalfTeam(int team) : team_(team) { omp_set_num_threads(team / 2); }
  ~HalfTeam() { omp_set_num_threads(team_); }
  HalfTeam(const HalfTeam&) = delete;
  HalfTeam& operator=(const HalfTeam&) = delete;

 private:
  int team_;
};

// One oneDNN primitive with its memories bound once. Slots: the op's inputs in
// order, then outputs. A slot whose data was prepacked at creation is skipped
// when handles are swapped.
class DnnlKernel : public Kernel {
 public:
  struct Slot {
    int arg;  // DNNL_ARG_*
    dnnl::memory mem;
    bool prepacked = false;
    std::shared_ptr<const AlignedBuffer> packed = nullptr;  // mem's bytes when prepacked into them
  };

  DnnlKernel(Dnnl& dn, dnnl::primitive prim, std::vector<Slot> inputs, std::vector<Slot> outputs,
             const dnnl::memory::desc& scratch_md);

  // Input `i` (not prepacked) arrives in layout `plain` and is reordered
  // into the slot's layout in the workspace before every run: for operands
  // the primitive reads much faster in its own layout (see
  // ReordersPlainWeightsFaster).
  // Nothing to do when the primitive chose `plain` itself.
  void StageInput(Dnnl& dn, size_t i, const dnnl::memory::desc& plain);

  // The op's input 0 (`bytes` long) is the accumulator the primitive adds
  // into (a sum post-op, see AddInto); the slots are the op's inputs 1, 2, ...
  void AccumulateInto(size_t bytes) {
    AddInto(0, bytes);
    first_input_ = 1;
  }

  // The op's input `i` (`bytes` long) is what the primitive adds its result
  // to (a sum post-op): copied into the output first unless the memory plan
  // put them in one place.
  void AddInto(size_t i, size_t bytes) {
    sum_input_ = i;
    sum_bytes_ = bytes;
  }

  // The same primitive built while the team had `team` / 2 threads (`team`:
  // the threads prim was built for), with the same layouts: Run() takes it
  // when the team is smaller than `team`. oneDNN's GEMM-based matmul (AVX2)
  // fixes its thread count at creation, so a worker that halves its team
  // under contention (cpu_backend.h) still ran every GEMM on the full team,
  // beside the pool threads libgomp keeps spinning: BERT-Base batch 1 next
  // to a busy process took 350-530 ms per halved run against 280 ms for a
  // one-thread predictor (AMD Zen 3, 2 threads).
  void AddHalfTeam(const dnnl::engine& engine, dnnl::primitive half,
                   const dnnl::memory::desc& scratch_md, int team);

  size_t workspace_bytes() const override {
    return stage_bytes_ + std::max(scratch_bytes_, scratch_half_bytes_);
  }
  void Run(const KernelArgs& a) override;

 private:
  dnnl::stream& stream_;
  dnnl::primitive prim_, half_;
  int team_ = 0;  // the threads prim_ was built for, when half_ serves smaller teams
  std::vector<Slot> inputs_, outputs_;
  dnnl::memory scratch_, scratch_half_;
  std::unordered_map<int, dnnl::memory> args_, args_half_;
  size_t scratch_bytes_ = 0, scratch_half_bytes_ = 0;
  size_t first_input_ = 0;
  size_t sum_input_ = 0, sum_bytes_ = 0;  // AddInto
  // The staged input (StageInput): its plain memory, the reorder into the
  // slot's layout, and the workspace bytes it takes (before the scratchpad).
  size_t stage_input_ = 0, stage_bytes_ = 0;
  dnnl::memory stage_src_;
  dnnl::reorder stage_;
};

// A convolution that runs in oneDNN's preferred activation layout: src is
// reordered from the op's plain layout (NCHW or NHWC) into workspace, the
// convolution writes its blocked result into workspace, and a reorder writes
// the plain layout to the output. Reorders are skipped when the chosen
// layout is the plain one. `weights`: the slots of the op's inputs after x
// (filter, bias), in order.
//
// A kernel may also hold the same convolution built for half the team
// (AddHalfTeam): oneDNN's convolutions split their work for the thread
// count they were built with and start that many threads whatever the
// team, so a worker that halves its team under contention
// (cpu_backend.h) gains nothing from them without it.
class BlockedConvKernel : public Kernel {
 public:
  // `conv`: the convolution (or deconvolution) primitive `pd` describes.
  BlockedConvKernel(Dnnl& dn, dnnl::primitive conv, const dnnl::primitive_desc_base& pd,
                    const dnnl::memory::desc& x_md, const dnnl::memory::desc& y_md,
                    std::vector<DnnlKernel::Slot> weights);
  size_t workspace_bytes() const override { return ws_; }
  // `half`: the convolution built while the team had `team` / 2 threads
  // (`team`: the threads `conv` was built for), with the same layouts and
  // weights; Run() takes it when the team is smaller than `team`.
  void AddHalfTeam(dnnl::primitive half, const dnnl::primitive_desc_base& pd, int team);
  // A kernel Run() takes instead while the team is smaller than `team`, the
  // one this kernel was built for: a Winograd convolution's direct twin.
  // Next to another busy process oneDNN's Winograd kernels ran ResNet-50's
  // 3x3 layers 2-6x slower than alone on two threads (a barrier per step of
  // their tile loops, each waiting for the descheduled thread), and their
  // one-thread twins ~1.5x slower than alone in a halved predictor, where
  // the direct ones held their one-thread time: with this twin the halved
  // team (cpu_backend.h) runs ResNet-50 batch 1 under contention within
  // ~5% of a predictor without Winograd (89-91 against 83-88 ms).
  void SetHalvedFallback(std::unique_ptr<BlockedConvKernel> kernel, int team) {
    ws_ = std::max(ws_, kernel->workspace_bytes());
    halved_ = std::move(kernel);
    team_ = team;
  }
  // The op's last input is a residual the convolution adds into its result
  // (sum post-op): Run() copies it into the output unless it is there, or
  // reorders it into the blocked result (a Winograd convolution's).
  void AddIntoResidual(size_t bytes);
  void Run(const KernelArgs& a) override;

 private:
  dnnl::stream& stream_;
  dnnl::primitive conv_, half_;
  // The threads conv_ was built for, when a smaller team runs something
  // else: half_ (AddHalfTeam) or halved_ (SetHalvedFallback).
  int team_ = 0;
  std::unique_ptr<BlockedConvKernel> halved_;
  std::vector<DnnlKernel::Slot> weights_;
  dnnl::memory x_plain_, y_plain_, x_blocked_, y_blocked_, scratch_, scratch_half_, r_plain_;
  dnnl::reorder to_blocked_, to_plain_, residual_to_blocked_;
  bool reorder_in_ = false, reorder_out_ = false;
  size_t src_off_ = 0, dst_off_ = 0, scratch_off_ = 0, ws_ = 0, residual_bytes_ = 0;
  std::unordered_map<int, dnnl::memory> args_, args_half_;
};

// Binds `v` to a memory of `chosen` layout. A constant is copied now (in
// the chosen layout: packed, shared with other kernels packing the same
// weight alike), and the slot holds the copy.
DnnlKernel::Slot BindInput(Dnnl& dn, int arg, const ir::Value* v, const dnnl::memory::desc& plain,
                           const dnnl::memory::desc& chosen);

// Marks the op's inputs `first`, `first + 1`, ... whose slots were packed
// at creation as copied (backend::Kernel::ReadsInput).
template <typename K>
std::unique_ptr<K> MarkPacked(std::unique_ptr<K> kernel, const std::vector<DnnlKernel::Slot>& slots,
                              size_t first) {
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].prepacked) kernel->MarkInputCopied(first + i);
  }
  return kernel;
}

}  // namespace tiller::cpu
