// matmul / matmul_accumulate / linear / conv2d / conv2d_transpose on oneDNN: float32;
// int8 (linear_int8, conv2d_int8: s8 x s8 with int32 sums); or bfloat16
// operands with a float32 result (out_dtype, from the mixed-precision pass:
// oneDNN accumulates in float32 and, on AMX or AVX512_BF16 machines,
// multiplies in bf16 several times faster). Constant weights are reordered
// once, at kernel creation, into the layout oneDNN prefers for the shapes at hand (blocked
// formats); this is where most of the speed over a plain GEMM call comes from. Memory objects and
// the argument map are built once too; Run() only swaps data handles (the
// run-time kernels, DnnlKernel and BlockedConvKernel: dnnl_kernel.h). Which
// kernels are registered follows what oneDNN can do here (dnnl_probes.cc).
#include <omp.h>

#include <atomic>
#include <cstring>

#include "backends/cpu/dnnl_context.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/conv_transpose.h"
#include "backends/cpu/kernels/dnnl_kernel.h"
#include "core/error.h"
#include "ir/ops/op_helpers.h"

namespace tiller::cpu {

namespace {

std::atomic<size_t> g_winograd_convs{0};

}  // namespace

size_t WinogradConvolutionsCreated() {
  return g_winograd_convs.load();
}

namespace {

std::atomic<size_t> g_half_team_matmuls{0};

}  // namespace

size_t HalfTeamMatmulsCreated() {
  return g_half_team_matmuls.load();
}

namespace {

using dnnl::memory;
using Dims = memory::dims;

// Logical [.., rows, cols] view of a row-major tensor padded to `rank` dims,
// optionally transposed in its last two dims. With matmul's folded
// transposes, the operand is `shape` read as transpose(., perm) (perm_a /
// perm_b), or the result is written into `shape` as transpose(result, perm)
// (perm_out, `inverse`): the logical dims and their strides are the
// tensor's, permuted.
memory::desc MatrixDesc(const Shape& shape, size_t rank, bool transpose, memory::data_type dt,
                        const std::vector<int64_t>& perm = {}, bool inverse = false) {
  const size_t r = shape.size();
  std::vector<int64_t> axes;
  if (perm.empty()) {
    for (size_t i = 0; i < r; ++i) axes.push_back(static_cast<int64_t>(i));
  } else {
    TILLER_CHECK(NormalizePermutation(perm, static_cast<int>(r), &axes),
                 "perm {} of a rank-{} operand", ShapeToString(perm), r);
  }
  const std::vector<int64_t> row_major = Strides(shape);
  // Padding dims of size 1 in front; their stride is never stepped.
  Dims dims(rank, 1), strides(rank, NumElements(shape));
  for (size_t i = 0; i < r; ++i) {
    // transpose(x, perm)[.., i, ..] is x[.., perm[i], ..]; written through
    // the inverse, the result's dim perm[i] is the tensor's dim i.
    const size_t from = inverse ? i : static_cast<size_t>(axes[i]);
    const size_t to = inverse ? static_cast<size_t>(axes[i]) : i;
    dims[rank - r + to] = shape[from];
    strides[rank - r + to] = row_major[from];
  }
  if (transpose) {
    std::swap(dims[rank - 1], dims[rank - 2]);
    std::swap(strides[rank - 1], strides[rank - 2]);
  }
  return memory::desc(dims, dt, strides);
}

// Gives `kernel` the matmul `d` built for half the worker's team
// (DnnlKernel::AddHalfTeam), when oneDNN picks the layouts of `pd` for it,
// so the packed weights serve both.
void AddHalfTeamMatmul(Dnnl& dn, DnnlKernel& kernel, const dnnl::matmul::desc& d,
                       const dnnl::primitive_attr& attr, const dnnl::matmul::primitive_desc& pd) {
  const int team = omp_get_max_threads();
  if (team <= 1) return;
  const HalfTeam half_team(team);
  const dnnl::matmul::primitive_desc half(d, attr, dn.engine);
  if (half.weights_desc() == pd.weights_desc() && half.src_desc() == pd.src_desc() &&
      half.dst_desc() == pd.dst_desc()) {
    kernel.AddHalfTeam(dn.engine, dnnl::matmul(half), half.scratchpad_desc(), team);
    ++g_half_team_matmuls;
  }
}

// `act`: the fused activation of linear / conv2d ("" for none), after the
// sum post-op when `sum` (the result added to what the destination holds).
dnnl::primitive_attr MakeAttr(const ir::Op& op, float scale, const std::string& act,
                              bool sum = false) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (scale != 1.0f) attr.set_output_scales(0, {scale});
  if (!act.empty() || sum) {
    dnnl::post_ops po;
    if (sum) po.append_sum(1.0f);
    if (!act.empty()) AppendActivation(po, act, op);
    attr.set_post_ops(po);
  }
  return attr;
}

// Whether oneDNN's float32 matmul runs much faster with the right-hand
// operand `b` (not a constant) reordered into its own layout first. Read in
// place from a row-major [K, N] tensor, each k step of the GEMM loads from
// an address N * 4 bytes further on; when that stride is a multiple of 4 KiB
// (but not a power of two: oneDNN 2.6 copies such operands itself), every
// row falls into the same L1 cache sets and the rows evict each other.
// Measured on Xeon (AVX-512, 2 threads): [1024, 768] x [768, 3072] 83-111 ->
// 163-198 GFLOP/s including the reorder (BERT's FFN-up projection and its
// weight gradient, 1.45-2.6x), strides of 3072 or 4096 bytes unchanged.
bool ReordersPlainWeightsFaster(const memory::desc& b, memory::data_type dt) {
  if (dt != memory::data_type::f32) return false;
  const memory::dims dims = b.dims();
  const dnnl_dims_t& strides = b.data.format_desc.blocking.strides;
  const size_t r = dims.size();
  if (b.data.format_kind != dnnl_blocked || strides[r - 1] != 1) return false;
  const int64_t row_bytes = strides[r - 2] * 4;
  const bool pow2 = (row_bytes & (row_bytes - 1)) == 0;
  return dims[r - 2] >= 256 && row_bytes % 4096 == 0 && !pow2;
}

// The layout to create a GEMM with for its weights `plain`: oneDNN's choice
// (format any) for a constant (packed once) or for a run-time value that
// ReordersPlainWeightsFaster (then *stage: DnnlKernel::StageInput reorders
// it every run); else the plain layout, read in place.
memory::desc WeightsLayout(const memory::desc& plain, memory::data_type dt, bool constant,
                           bool* stage) {
  *stage = !constant && ReordersPlainWeightsFaster(plain, dt);
  return constant || *stage ? memory::desc(plain.dims(), dt, memory::format_tag::any) : plain;
}

// An operand with no elements (K = 0, or no rows or columns): oneDNN's
// primitive creation divides by such dims (SIGFPE), so these run here. The
// product is zeros: matmul writes zeros, matmul_accumulate the accumulator,
// linear the bias (or zeros) in every row, plus its residual.
std::unique_ptr<Kernel> MakeEmptyProduct(const ir::Op& op) {
  const size_t bytes = op.outputs[0]->bytes();
  const bool accumulate = op.is(ir::Opcode::matmul_accumulate);
  const bool bias = op.is(ir::Opcode::linear) && op.input(2) != nullptr;
  const bool residual = op.is(ir::Opcode::linear) && op.input(3) != nullptr;
  const int64_t n = op.outputs[0]->shape().empty() ? 0 : op.outputs[0]->shape().back();
  const DType out_dtype = op.outputs[0]->dtype();
  if (bias && (out_dtype != DType::kF32 || op.input(2)->dtype() != DType::kF32))
    Fail(ErrorKind::kUnimplemented, "{} ({}): an empty product with a {} bias into {}", op.type,
         op.name, DTypeName(op.input(2)->dtype()), DTypeName(out_dtype));
  if (residual && out_dtype != DType::kF32)
    Fail(ErrorKind::kUnimplemented, "{} ({}): an empty product with a residual into {}", op.type,
         op.name, DTypeName(out_dtype));
  return std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
    if (accumulate) {
      if (a.outputs[0] != a.inputs[0]) std::memcpy(a.outputs[0], a.inputs[0], bytes);
    } else if (residual && n > 0) {  // the residual may be the output's own storage
      auto* y = static_cast<float*>(a.outputs[0]);
      const auto* b = bias ? static_cast<const float*>(a.inputs[2]) : nullptr;
      const auto* r = static_cast<const float*>(a.inputs[3]);
      for (size_t i = 0; i < bytes / sizeof(float); ++i)
        y[i] = b ? b[i % static_cast<size_t>(n)] + r[i] : r[i];
    } else if (bias && n > 0) {
      auto* y = static_cast<float*>(a.outputs[0]);
      const auto* b = static_cast<const float*>(a.inputs[2]);
      for (size_t r = 0; r < bytes / sizeof(float) / static_cast<size_t>(n); ++r)
        std::memcpy(y + r * n, b, static_cast<size_t>(n) * sizeof(float));
    } else if (bytes) {
      std::memset(a.outputs[0], 0, bytes);
    }
  });
}

// Whether a GEMM op has an operand (or result) without elements.
bool EmptyProduct(const ir::Op& op) {
  for (const ir::Value* v : op.inputs) {
    if (v && NumElements(v->shape()) == 0) return true;
  }
  return NumElements(op.outputs[0]->shape()) == 0;
}

std::unique_ptr<Kernel> MakeMatmul(const ir::Op& op, backend::Device& device) {
  if (EmptyProduct(op)) return MakeEmptyProduct(op);
  Dnnl& dn = DnnlOf(device);
  const ir::Value* a = op.inputs[0];
  const ir::Value* b = op.inputs[1];
  const ir::Value* out = op.outputs[0];
  Shape a_shape = a->shape(), b_shape = b->shape(), c_shape = out->shape();
  size_t rank = c_shape.size();
  // [.., M, K] x [K, N] (B without batch dims) is one GEMM over A's rows,
  // [.. * M, K] x [K, N]: oneDNN then chooses B's layout as for a 2-D
  // matmul (a broadcast batched matmul kept it plain, the slow case of
  // ReordersPlainWeightsFaster) and splits the rows among threads.
  const bool no_perms = op.GetInts("perm_a").empty() && op.GetInts("perm_b").empty() &&
                        op.GetInts("perm_out").empty();
  if (rank > 2 && no_perms && !op.GetBool("transpose_a") && b_shape.size() >= 2 &&
      NumElements(b_shape) == b_shape[b_shape.size() - 2] * b_shape.back()) {
    const int64_t k = a_shape.back(), n = c_shape.back();
    a_shape = {NumElements(a_shape) / k, k};
    b_shape = {b_shape[b_shape.size() - 2], b_shape.back()};
    c_shape = {NumElements(c_shape) / n, n};
    rank = 2;
  }
  const auto in_t = ToDnnl(a->dtype()), out_t = ToDnnl(out->dtype());
  memory::desc a_md =
      MatrixDesc(a_shape, rank, op.GetBool("transpose_a"), in_t, op.GetInts("perm_a"));
  memory::desc b_md =
      MatrixDesc(b_shape, rank, op.GetBool("transpose_b"), in_t, op.GetInts("perm_b"));
  memory::desc c_md = MatrixDesc(c_shape, rank, false, out_t, op.GetInts("perm_out"), true);
  // Prepack constant weights in oneDNN's preferred layout; reorder a
  // variable one into it on every run where that pays.
  bool stage = false;
  const memory::desc b_any = WeightsLayout(b_md, in_t, IsConstant(b), &stage);
  auto attr = MakeAttr(op, static_cast<float>(op.GetFloat("alpha")), "");
  const dnnl::matmul::desc desc(a_md, b_any, c_md);
  dnnl::matmul::primitive_desc pd(desc, attr, dn.engine);
  std::vector<DnnlKernel::Slot> ins{{DNNL_ARG_SRC, memory(a_md, dn.engine, DNNL_MEMORY_NONE)},
                                    BindInput(dn, DNNL_ARG_WEIGHTS, b, b_md, pd.weights_desc())};
  std::vector<DnnlKernel::Slot> outs{{DNNL_ARG_DST, memory(c_md, dn.engine, DNNL_MEMORY_NONE)}};
  auto kernel = std::make_unique<DnnlKernel>(dn, dnnl::matmul(pd), ins, std::move(outs),
                                             pd.scratchpad_desc());
  AddHalfTeamMatmul(dn, *kernel, desc, attr, pd);
  if (stage) kernel->StageInput(dn, 1, b_md);
  return MarkPacked(std::move(kernel), ins, 0);
}

// acc + op(a) op(b): oneDNN's sum post-op adds the product into the
// destination as the GEMM writes it. The destination is the accumulator's
// own storage when the memory plan put the result there (in place);
// otherwise the accumulator is copied into it first.
std::unique_ptr<Kernel> MakeMatmulAccumulate(const ir::Op& op, backend::Device& device) {
  if (EmptyProduct(op)) return MakeEmptyProduct(op);
  Dnnl& dn = DnnlOf(device);
  const ir::Value* acc = op.inputs[0];
  size_t rank = acc->shape().size();
  const auto in_t = ToDnnl(op.inputs[1]->dtype()), acc_t = ToDnnl(acc->dtype());
  memory::desc a_md = MatrixDesc(op.inputs[1]->shape(), rank, op.GetBool("transpose_a"), in_t);
  memory::desc b_md = MatrixDesc(op.inputs[2]->shape(), rank, op.GetBool("transpose_b"), in_t);
  memory::desc c_md = MatrixDesc(acc->shape(), rank, false, acc_t);
  bool stage = false;
  const memory::desc b_any = WeightsLayout(b_md, in_t, /*constant=*/false, &stage);
  dnnl::primitive_attr attr = MakeAttr(op, static_cast<float>(op.GetFloat("alpha")), "");
  dnnl::post_ops po;
  po.append_sum(1.0f);
  attr.set_post_ops(po);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_any, c_md), attr, dn.engine);
  std::vector<DnnlKernel::Slot> ins{
      {DNNL_ARG_SRC, memory(a_md, dn.engine, DNNL_MEMORY_NONE)},
      {DNNL_ARG_WEIGHTS, memory(pd.weights_desc(), dn.engine, DNNL_MEMORY_NONE)}};
  std::vector<DnnlKernel::Slot> outs{{DNNL_ARG_DST, memory(c_md, dn.engine, DNNL_MEMORY_NONE)}};
  auto kernel = std::make_unique<DnnlKernel>(dn, dnnl::matmul(pd), std::move(ins), std::move(outs),
                                             pd.scratchpad_desc());
  kernel->AccumulateInto(acc->bytes());
  if (stage) kernel->StageInput(dn, 1, b_md);
  return kernel;
}

std::unique_ptr<Kernel> MakeLinear(const ir::Op& op, backend::Device& device) {
  if (EmptyProduct(op)) return MakeEmptyProduct(op);
  Dnnl& dn = DnnlOf(device);
  const ir::Value* x = op.inputs[0];
  const ir::Value* w = op.inputs[1];
  const ir::Value* bias = op.input(2);
  const ir::Value* residual = op.input(3);  // fuse_linear_residual
  int64_t k = w->shape()[0], n = w->shape()[1];
  int64_t m = NumElements(x->shape()) / k;
  const auto in_t = ToDnnl(x->dtype()), out_t = ToDnnl(op.outputs[0]->dtype());
  using tag = memory::format_tag;
  memory::desc x_md({m, k}, in_t, tag::ab), w_md({k, n}, in_t, tag::ab);
  memory::desc y_md({m, n}, out_t, tag::ab);
  bool stage = false;
  const memory::desc w_any = WeightsLayout(w_md, in_t, IsConstant(w), &stage);
  memory::desc b_md = bias ? memory::desc({1, n}, ToDnnl(bias->dtype()), tag::ab) : memory::desc();
  auto attr = MakeAttr(op, 1.0f, op.GetStr("activation"), residual != nullptr);
  dnnl::matmul::desc desc(x_md, w_any, b_md, y_md);
  dnnl::matmul::primitive_desc pd(desc, attr, dn.engine);
  if (IsConstant(w) && pd.weights_desc() == w_md && ReordersPlainWeightsFaster(w_md, in_t)) {
    // oneDNN 2.6's AVX2 GEMM (gemm:jit) keeps a constant plain under format
    // any and reads a B whose rows lie a multiple of 4 KiB apart at ~2/3 of
    // its rate (BERT's FFN-up, [128, 768] x [768, 3072]: 8.3 ms, 5.9 ms with
    // B column-major; BERT-Base batch 1 230 -> 190 ms on AMD Zen 3), so the
    // constant is packed column-major (ba) instead, once.
    desc = dnnl::matmul::desc(x_md, memory::desc({k, n}, in_t, tag::ba), b_md, y_md);
    pd = dnnl::matmul::primitive_desc(desc, attr, dn.engine);
  }
  std::vector<DnnlKernel::Slot> ins{{DNNL_ARG_SRC, memory(x_md, dn.engine, DNNL_MEMORY_NONE)},
                                    BindInput(dn, DNNL_ARG_WEIGHTS, w, w_md, pd.weights_desc())};
  if (bias) ins.push_back(BindInput(dn, DNNL_ARG_BIAS, bias, b_md, b_md));
  std::vector<DnnlKernel::Slot> outs{{DNNL_ARG_DST, memory(y_md, dn.engine, DNNL_MEMORY_NONE)}};
  auto kernel = std::make_unique<DnnlKernel>(dn, dnnl::matmul(pd), ins, std::move(outs),
                                             pd.scratchpad_desc());
  AddHalfTeamMatmul(dn, *kernel, desc, attr, pd);
  if (stage) kernel->StageInput(dn, 1, w_md);
  if (residual) kernel->AddInto(3, op.outputs[0]->bytes());
  return MarkPacked(std::move(kernel), ins, 0);
}

// linear_int8: an s8 x s8 GEMM (VNNI) whose int32 sums oneDNN rescales per
// output column (output scales, mask over N) into float32, then the fused
// activation. oneDNN 2.x adds an int8 GEMM's bias before the output scale,
// so the bias it is given is bias / scale. Scale and bias are constants
// (int8_matmul only builds the op on constants): read here, once.
std::unique_ptr<Kernel> MakeLinearInt8(const ir::Op& op, backend::Device& device) {
  Dnnl& dn = DnnlOf(device);
  const ir::Value* x = op.inputs[0];
  const ir::Value* w = op.inputs[1];
  const ir::Value* scale = op.inputs[2];
  const ir::Value* bias = op.input(3);
  if (!IsConstant(w) || !IsConstant(scale) || (bias && !IsConstant(bias)))
    Fail(ErrorKind::kUnimplemented, "{} ({}): weights, scale and bias must be constants", op.type,
         op.name);
  const int64_t k = w->shape()[0], n = w->shape()[1];
  const int64_t m = NumElements(x->shape()) / k;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  memory::desc x_md({m, k}, dt::s8, tag::ab), w_md({k, n}, dt::s8, tag::ab);
  memory::desc b_md = bias ? memory::desc({1, n}, dt::f32, tag::ab) : memory::desc();
  const float* s = reinterpret_cast<const float*>(scale->data->data());
  std::vector<float> scales(s, s + n);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_output_scales(2, scales);  // mask 2: one scale per column (dim 1)
  dnnl::post_ops po;
  if (!op.GetStr("activation").empty()) AppendActivation(po, op.GetStr("activation"), op);
  memory::desc y_md({m, n}, AppendRequantize(po, op), tag::ab);
  attr.set_post_ops(po);
  dnnl::matmul::primitive_desc pd(
      dnnl::matmul::desc(x_md, memory::desc({k, n}, dt::s8, tag::any), b_md, y_md), attr,
      dn.engine);
  std::vector<DnnlKernel::Slot> ins{{DNNL_ARG_SRC, memory(x_md, dn.engine, DNNL_MEMORY_NONE)},
                                    BindInput(dn, DNNL_ARG_WEIGHTS, w, w_md, pd.weights_desc())};
  if (bias) {
    memory b(b_md, dn.engine);  // allocated by oneDNN, lives with the kernel
    const float* bv = reinterpret_cast<const float*>(bias->data->data());
    float* dst = static_cast<float*>(b.get_data_handle());
    for (int64_t j = 0; j < n; ++j) dst[j] = scales[j] != 0.0f ? bv[j] / scales[j] : 0.0f;
    // Slot 2 is the op's scale, read above: a prepacked slot is never rebound.
    ins.push_back({DNNL_ARG_BIAS, b, true});
  }
  std::vector<DnnlKernel::Slot> outs{{DNNL_ARG_DST, memory(y_md, dn.engine, DNNL_MEMORY_NONE)}};
  auto kernel = std::make_unique<DnnlKernel>(dn, dnnl::matmul(pd), std::move(ins), std::move(outs),
                                             pd.scratchpad_desc());
  // The weights packed, the scale and bias read above.
  for (size_t i = 1; i < op.inputs.size(); ++i) kernel->MarkInputCopied(i);
  return kernel;
}

// conv2d, and conv2d_int8: s8 x s8 with int32 sums that oneDNN rescales per
// output channel (output scales) into float32, its bias given as bias /
// scale (oneDNN 2.x adds it before the scale, as linear_int8's). The int8
// op's filter, scale and bias are constants (the int8_conv pass builds it
// on constants), read here once; its inputs after the scale sit one later.
std::unique_ptr<Kernel> MakeConv2d(const ir::Op& op, backend::Device& device) {
  Dnnl& dn = DnnlOf(device);
  const bool int8 = op.is(ir::Opcode::conv2d_int8);
  const ir::Value* x = op.inputs[0];
  const ir::Value* w = op.inputs[1];
  const ir::Value* scale = int8 ? op.inputs[2] : nullptr;
  const ir::Value* bias = op.input(int8 ? 3 : 2);
  const ir::Value* residual = op.input(int8 ? 4 : 3);
  const ir::Value* y = op.outputs[0];
  if (int8 && (!IsConstant(w) || !IsConstant(scale) || (bias && !IsConstant(bias))))
    Fail(ErrorKind::kUnimplemented, "{} ({}): filter, scale and bias must be constants", op.type,
         op.name);
  const ir::ActLayout layout = ir::ActLayoutOf(op);
  // NHWC and NCHW8c: the layouts of chains the passes built for oneDNN's
  // direct kernels, which run on them as they are.
  const bool channels_last = layout != ir::ActLayout::kNchw;
  int64_t groups = op.GetInt("groups");
  const auto& strides = op.GetInts("strides");
  const auto& pads = op.GetInts("pads");
  const auto& dil = op.GetInts("dilations");
  const auto in_t = ToDnnl(x->dtype()), out_t = ToDnnl(y->dtype());
  using tag = memory::format_tag;
  const tag act_tag = layout == ir::ActLayout::kBlocked ? tag::nChw8c
                      : channels_last                   ? tag::nhwc
                                                        : tag::nchw;
  memory::desc x_md(ir::AsNchw(x->shape(), layout), in_t, act_tag);
  memory::desc y_md(ir::AsNchw(y->shape(), layout), out_t, act_tag);
  Shape ws = w->shape();
  memory::desc w_md =
      groups == 1 ? memory::desc(ws, in_t, tag::oihw)
                  : memory::desc({groups, ws[0] / groups, ws[1], ws[2], ws[3]}, in_t, tag::goihw);
  memory::desc w_any(w_md.dims(), in_t,
                     IsConstant(w) ? tag::any : (groups == 1 ? tag::oihw : tag::goihw));
  memory::desc b_md = bias ? memory::desc({ws[0]}, ToDnnl(bias->dtype()), tag::a) : memory::desc();
  // oneDNN dilation counts the gaps: Paddle's 1 is oneDNN's 0.
  Dims d_dil{dil[0] - 1, dil[1] - 1};
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  std::vector<float> scales;
  if (int8) {
    const float* s = reinterpret_cast<const float*>(scale->data->data());
    scales.assign(s, s + ws[0]);
    attr.set_output_scales(2, scales);  // mask 2: one scale per output channel (dim 1)
  }
  dnnl::post_ops po;
  // The residual (fuse_conv_add) is oneDNN's sum post-op, before the
  // activation: the result is added to what the destination holds, which is
  // the residual itself when the memory plan gave the output its storage
  // (OpSchema::inplace_input), or a copy of it. (A binary post-op reading
  // the residual needs no copy, but oneDNN 2.6 then leaves its fastest 1x1
  // kernels: 30-50% slower convolutions on ResNet-50.)
  if (residual) {
    TILLER_CHECK(channels_last, "{} ({}): a residual input needs the NHWC or NCHW8c layout",
                 op.type, op.name);
    po.append_sum(1.0f);
  }
  if (!op.GetStr("activation").empty()) AppendActivation(po, op.GetStr("activation"), op);
  if (int8) AppendRequantize(po, op);  // y's type says s8 already
  attr.set_post_ops(po);
  // NCHW: let oneDNN choose blocked activation layouts (nChw16c on AVX-512):
  // its direct kernels on them are several times faster than on plain NCHW,
  // which it can only serve with im2col + GEMM, and the kernel reorders in
  // and out through its workspace. NHWC (the channels_last pass) is what
  // oneDNN picks for most shapes anyway: it runs as it is, no reorders.
  // Winograd (backends/cpu/passes/conv_winograd.cc) takes blocked layouts only: NHWC
  // too is reordered in and out (a few % of the convolution's time).
  auto describe = [&](dnnl::algorithm alg, bool plain) {
    memory::desc x_any = plain ? x_md : memory::desc(x_md.dims(), in_t, tag::any);
    memory::desc y_any = plain ? y_md : memory::desc(y_md.dims(), out_t, tag::any);
    return dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, alg, x_any, w_any,
                                           b_md, y_any, Dims{strides[0], strides[1]}, d_dil,
                                           Dims{pads[0], pads[2]}, Dims{pads[1], pads[3]});
  };
  const dnnl::convolution_forward::desc desc_any =
      describe(dnnl::algorithm::convolution_direct, channels_last);
  dnnl::convolution_forward::primitive_desc pd;
  bool winograd = false;
  if (!int8 && op.GetStr("algorithm") == "winograd") {
    // oneDNN 2.6 has Winograd kernels for AVX-512 only: elsewhere the
    // direct one computes the same function.
    dnnl::convolution_forward::desc wino = describe(dnnl::algorithm::convolution_winograd, false);
    try {
      pd = dnnl::convolution_forward::primitive_desc(wino, attr, dn.engine);
      winograd = true;
      ++g_winograd_convs;
    } catch (const dnnl::error&) {
    }
  }
  if (!pd) pd = dnnl::convolution_forward::primitive_desc(desc_any, attr, dn.engine);
  // The filter packed for `p`, and a float bias as it is (int8's: below).
  auto filter_and_bias = [&](const dnnl::convolution_forward::primitive_desc& p) {
    std::vector<DnnlKernel::Slot> slots{BindInput(dn, DNNL_ARG_WEIGHTS, w, w_md, p.weights_desc())};
    if (bias && !int8) slots.push_back(BindInput(dn, DNNL_ARG_BIAS, bias, b_md, b_md));
    return slots;
  };
  std::vector<DnnlKernel::Slot> weights = filter_and_bias(pd);
  if (bias && int8) {
    memory b(b_md, dn.engine);  // allocated by oneDNN, lives with the kernel
    const float* bv = reinterpret_cast<const float*>(bias->data->data());
    float* dst = static_cast<float*>(b.get_data_handle());
    for (int64_t o = 0; o < ws[0]; ++o) dst[o] = scales[o] != 0.0f ? bv[o] / scales[o] : 0.0f;
    // In the slot of the op's scale (input 2), read above: a prepacked slot
    // is never rebound.
    weights.push_back({DNNL_ARG_BIAS, b, true});
  }
  auto kernel = std::make_unique<BlockedConvKernel>(dn, dnnl::convolution_forward(pd), pd, x_md,
                                                    y_md, weights);
  if (int8) {  // the filter packed, the scale and bias read above
    for (size_t i = 1; i <= 3 && i < op.inputs.size(); ++i) {
      if (op.inputs[i]) kernel->MarkInputCopied(i);
    }
  } else {
    kernel = MarkPacked(std::move(kernel), weights, 1);
  }
  if (residual) kernel->AddIntoResidual(y->bytes());
  const int team = omp_get_max_threads();
  if (winograd && team > 1) {
    // Its halved team runs the direct convolution (SetHalvedFallback), on
    // the op's own layouts, with the filter packed for it too.
    const HalfTeam half_team(team);
    dnnl::convolution_forward::primitive_desc direct(
        describe(dnnl::algorithm::convolution_direct, channels_last), attr, dn.engine);
    auto twin = std::make_unique<BlockedConvKernel>(dn, dnnl::convolution_forward(direct), direct,
                                                    x_md, y_md, filter_and_bias(direct));
    if (residual) twin->AddIntoResidual(y->bytes());
    kernel->SetHalvedFallback(std::move(twin), team);
    return kernel;
  }
  // The same convolution for half the team (kernels are built on the
  // device's worker, with its team: see BlockedConvKernel), when oneDNN
  // picks the same layouts for it, so the packed weights serve both.
  if (team > 1) {
    const HalfTeam half_team(team);
    dnnl::convolution_forward::primitive_desc half(desc_any, attr, dn.engine);
    if (half.weights_desc() == pd.weights_desc() && half.src_desc() == pd.src_desc() &&
        half.dst_desc() == pd.dst_desc())
      kernel->AddHalfTeam(dnnl::convolution_forward(half), half, team);
  }
  return kernel;
}

// conv2d_transpose through oneDNN's deconvolution (blocked layouts chosen by
// oneDNN, as conv2d): groups of 1 and an output padding no larger than the
// end pad (ir::ConvTransposeEndPads >= 0). Other cases take the direct
// kernel (conv_transpose.cc), which is 20-30x slower on UNet's upsampling;
// channels_last makes NHWC only the ones this kernel runs on oneDNN.
std::unique_ptr<Kernel> MakeConvTranspose2d(const ir::Op& op, backend::Device& device) {
  const ir::Value* x = op.inputs[0];
  const ir::Value* w = op.inputs[1];
  const ir::Value* bias = op.input(2);
  const ir::Value* y = op.outputs[0];
  const Shape &xs = x->shape(), &ws = w->shape(), &ys = y->shape();
  const auto& strides = op.GetInts("strides");
  const auto& pads = op.GetInts("pads");
  const auto& dil = op.GetInts("dilations");
  const bool channels_last = op.GetStr("data_format") == "NHWC";
  // oneDNN takes the output size from its dims and both paddings.
  const std::array<int64_t, 2> end_pad =
      ir::ConvTransposeEndPads(op, ir::AsNchw(xs, channels_last), ws);
  if (op.GetInt("groups") != 1 || end_pad[0] < 0 || end_pad[1] < 0 || x->dtype() != DType::kF32) {
    TILLER_CHECK(!channels_last, "{} ({}): NHWC needs the oneDNN deconvolution's conditions",
                 op.type, op.name);  // passes/channels_last.cc checks them
    return MakeDirectConvTranspose(op);
  }
  Dnnl& dn = DnnlOf(device);
  using tag = memory::format_tag;
  const auto t = memory::data_type::f32;
  const tag act = channels_last ? tag::nhwc : tag::nchw;
  memory::desc x_md(ir::AsNchw(xs, channels_last), t, act),
      y_md(ir::AsNchw(ys, channels_last), t, act);
  // Paddle's filter is [C_in, C_out, KH, KW]: oneDNN's (out, in, h, w) read as iohw.
  memory::desc w_md({ws[1], ws[0], ws[2], ws[3]}, t, tag::iohw);
  memory::desc w_any(w_md.dims(), t, IsConstant(w) ? tag::any : tag::iohw);
  memory::desc b_md = bias ? memory::desc({ws[1]}, t, tag::a) : memory::desc();
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  // NCHW: oneDNN's choice of blocked layouts, reordered through the
  // workspace; NHWC as it is (as conv2d).
  memory::desc x_any = channels_last ? x_md : memory::desc(x_md.dims(), t, tag::any);
  memory::desc y_any = channels_last ? y_md : memory::desc(y_md.dims(), t, tag::any);
  dnnl::deconvolution_forward::desc desc(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct, x_any, w_any, b_md,
      y_any, Dims{strides[0], strides[1]}, Dims{dil[0] - 1, dil[1] - 1}, Dims{pads[0], pads[2]},
      Dims{end_pad[0], end_pad[1]});
  dnnl::deconvolution_forward::primitive_desc pd(desc, attr, dn.engine);
  std::vector<DnnlKernel::Slot> weights{
      BindInput(dn, DNNL_ARG_WEIGHTS, w, w_md, pd.weights_desc())};
  if (bias) weights.push_back(BindInput(dn, DNNL_ARG_BIAS, bias, b_md, b_md));
  return MarkPacked(std::make_unique<BlockedConvKernel>(dn, dnnl::deconvolution_forward(pd), pd,
                                                        x_md, y_md, weights),
                    weights, 1);
}

TILLER_CPU_KERNEL("matmul", MakeMatmul, Signature("T, T -> T").Where("T", {DType::kF32}));
TILLER_CPU_KERNEL("conv2d_transpose", MakeConvTranspose2d,
                  Signature("T, T, T? -> T").Where("T", {DType::kF32}));
TILLER_CPU_KERNEL("matmul_accumulate", MakeMatmulAccumulate,
                  Signature("T, T, T -> T").Where("T", {DType::kF32}));
TILLER_CPU_KERNEL("linear", MakeLinear, Signature("T, T, T?, T? -> T").Where("T", {DType::kF32}));
TILLER_CPU_KERNEL("conv2d", MakeConv2d, Signature("T, T, T?, T? -> T").Where("T", {DType::kF32}));
// int8 GEMMs and convolutions only where oneDNN computes them exactly
// (DnnlMultipliesInt8Exactly); elsewhere the int8 passes leave quantized
// pairs as float32 math (PassContext::int8_gemms).
const bool kInt8Registered = [] {
  if (!DnnlMultipliesInt8Exactly()) return false;
  const auto int8 = [](const char* types) {
    return Signature(types).Where("T", {DType::kI8}).Where("O", {DType::kF32, DType::kI8});
  };
  RegisterKernel("linear_int8", MakeLinearInt8, int8("T, T, float32, float32? -> O"));
  RegisterKernel("conv2d_int8", MakeConv2d, int8("T, T, float32, float32?, float32? -> O"));
  return true;
}();
// Mixed precision: bfloat16 operands, float32 accumulation and result, and
// writing bfloat16 (the pass folded the cast after them); registered only
// where oneDNN multiplies bfloat16, so that the compiler's probe
// (compile::DevicesMultiplyIn) finds them missing elsewhere.
const bool kBF16Registered = [] {
  if (!DnnlMultipliesBF16()) return false;
  const auto h = [](const char* types) { return Signature(types).Where("H", {DType::kBF16}); };
  RegisterKernel("matmul", MakeMatmul, h("H, H -> float32"));
  RegisterKernel("matmul_accumulate", MakeMatmulAccumulate, h("float32, H, H -> float32"));
  RegisterKernel("linear", MakeLinear, h("H, H, float32?, float32? -> float32"));
  RegisterKernel("conv2d", MakeConv2d, h("H, H, float32?, float32? -> float32"));
  RegisterKernel("matmul", MakeMatmul, h("H, H -> H"));
  RegisterKernel("linear", MakeLinear, h("H, H, float32? -> H"));
  RegisterKernel("conv2d", MakeConv2d, h("H, H, float32? -> H"));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
