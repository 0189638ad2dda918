// conv2d|pool2d{NHWC} chains -> the same ops on NCHW8c tensors
//   (inference; the compile driver runs it where the CPU's convolutions run
//   fastest on channels in blocks of 8: AVX2 without AVX-512)
//   x -> conv2d{NHWC} -> relu -> conv2d{NHWC} -> ...
//   ==>  reshape + transpose{to [N, C / 8, H, W, 8]} -> conv2d{NCHW8c} -> relu
//        -> conv2d{NCHW8c} -> ... -> transpose + reshape{to NHWC} only where
//        an NHWC reader remains
// oneDNN 2.6's AVX2 direct convolutions are much slower on NHWC than on
// nChw8c (AMD Zen 3, 2 threads, ResNet-50 batch 8: 3 x 3 layers 1.2-2.2x,
// 1 x 1 ones 1.05-1.3x; UNet's 3 x 3 layers ~1.8x), while on AVX-512 NHWC is
// what oneDNN picks itself for most shapes. This stage runs after
// channels_last and the conv fusions: it moves whole NHWC chains of
// convolutions (one group, float32, channels in and out multiples of 8,
// residual and activation fused), poolings, layout-agnostic ops and
// channel concats into the blocked layout.
//
// A chain converts the values entering it and leaving it, so it pays only
// when its convolutions' work outweighs those conversions: the eligible ops
// are joined into components through the values between them, and a
// component is rewritten when its convolutions' flops are at least
// kFlopsPerConvertedByte times the bytes converted at its edges. (A 20% gain
// on a convolution running at ~150 GFLOP/s saves F / 750e9 s; a conversion
// reading and writing B bytes at ~10 GB/s costs B / 5e9 s.) That keeps
// MobileNetV3's squeeze-excitation pairs of 1 x 1 convolutions on a few
// channels, whose inputs and outputs are large, in NHWC.
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "backends/cpu/passes/cpu_passes.h"
#include "ir/ops/op_helpers.h"
#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::cpu {
namespace {

// The pattern helpers (passes/pattern_utils.h).
using namespace passes;  // NOLINT(google-build-using-namespace)

constexpr int64_t kB = ir::kChannelBlock;
constexpr double kFlopsPerConvertedByte = 150;

bool BlocksChannels(const ir::Value* v) {
  return v && v->rank() == 4 && v->dtype() == DType::kF32 && v->shape()[3] % kB == 0;
}

bool IsSingleElement(const ir::Value* v) {
  return v->rank() <= 4 && NumElements(v->shape()) == 1;
}

// What an eligible op is; kNone: it stays.
enum class Kind { kNone, kConv, kPool, kElementwise, kConcat };

Kind Classify(const ir::Op& op) {
  if (op.outputs.size() != 1 || !BlocksChannels(op.outputs[0])) return Kind::kNone;
  const int64_t c = op.outputs[0]->shape()[3];
  if (op.is(ir::Opcode::conv2d)) {
    const bool ok = op.GetStr("data_format") == "NHWC" && op.GetInt("groups") == 1 &&
                    BlocksChannels(op.inputs[0]) &&
                    (!op.input(3) || op.input(3)->shape() == op.outputs[0]->shape());
    return ok ? Kind::kConv : Kind::kNone;
  }
  if (op.is(ir::Opcode::pool2d))
    return op.GetStr("data_format") == "NHWC" && BlocksChannels(op.inputs[0]) ? Kind::kPool
                                                                              : Kind::kNone;
  if (op.is(ir::Opcode::concat)) {
    if (NormalizeAxis(op.GetInt("axis"), 4) != 3) return Kind::kNone;
    for (const ir::Value* in : op.inputs) {
      if (!BlocksChannels(in)) return Kind::kNone;
    }
    return Kind::kConcat;
  }
  if (!IsLayoutAgnostic(op)) return Kind::kNone;
  // Every input broadcasts alike in both layouts: a single element, or a
  // 4-D tensor with all the result's channels (a per-channel [1, 1, 1, C]
  // one too: [1, C / 8, 1, 1, 8]).
  for (const ir::Value* in : op.inputs) {
    if (!in || (!IsSingleElement(in) && (in->rank() != 4 || in->shape()[3] != c)))
      return Kind::kNone;
  }
  return Kind::kElementwise;
}

// Which inputs of an eligible op travel in the blocked layout: the
// activation (and a conv2d's residual), not a filter or bias.
bool IsActivationInput(const ir::Op& op, Kind kind, size_t i) {
  if (kind == Kind::kConv) return i == 0 || i == 3;
  return !IsSingleElement(op.inputs[i]);
}

double ConvFlops(const ir::Op& conv) {
  const Shape& w = conv.inputs[1]->shape();
  return 2.0 * static_cast<double>(NumElements(conv.outputs[0]->shape())) *
         static_cast<double>(w[1] * w[2] * w[3]);
}

struct Components {
  std::vector<size_t> parent;
  size_t Find(size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  }
  void Join(size_t a, size_t b) { parent[Find(a)] = Find(b); }
};

}  // namespace

int BlockConvChains(ir::Graph& g) {
  std::vector<ir::Op*> ops;
  for (const auto& op : g.ops()) ops.push_back(op.get());
  std::unordered_map<const ir::Op*, size_t> index;
  std::vector<Kind> kind(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    index[ops[i]] = i;
    kind[i] = Classify(*ops[i]);
    // A pooling joins a chain; it never starts one: its input is what a
    // chain starting before it converts, 4x a 2 x 2 pooling's result
    // (ResNet's stem would convert 25 MB at batch 8, not 6).
    const ir::Op* in = ops[i]->inputs[0] ? ops[i]->inputs[0]->producer : nullptr;
    if (kind[i] == Kind::kPool && (!in || kind[index.at(in)] == Kind::kNone)) kind[i] = Kind::kNone;
  }
  // Eligible ops joined through the activations between them.
  Components comp{std::vector<size_t>(ops.size())};
  std::iota(comp.parent.begin(), comp.parent.end(), size_t{0});
  for (size_t i = 0; i < ops.size(); ++i) {
    if (kind[i] == Kind::kNone) continue;
    for (size_t k = 0; k < ops[i]->inputs.size(); ++k) {
      const ir::Value* in = ops[i]->inputs[k];
      if (!in || !in->producer || !IsActivationInput(*ops[i], kind[i], k)) continue;
      const size_t p = index.at(in->producer);
      if (kind[p] != Kind::kNone) comp.Join(i, p);
    }
  }
  // Each component's convolution flops against the bytes it converts: the
  // activations it reads from outside, the results read outside it.
  std::unordered_map<size_t, double> flops, converted;
  std::unordered_map<size_t, std::unordered_set<const ir::Value*>> entering;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (kind[i] == Kind::kNone) continue;
    const size_t root = comp.Find(i);
    if (kind[i] == Kind::kConv) flops[root] += ConvFlops(*ops[i]);
    for (size_t k = 0; k < ops[i]->inputs.size(); ++k) {
      const ir::Value* in = ops[i]->inputs[k];
      if (!IsActivationInput(*ops[i], kind[i], k)) continue;
      const bool inside = in->producer && kind[index.at(in->producer)] != Kind::kNone &&
                          comp.Find(index.at(in->producer)) == root;
      if (!inside && entering[root].insert(in).second)
        converted[root] += static_cast<double>(in->bytes());
    }
    const ir::Value* y = ops[i]->outputs[0];
    bool read_outside = IsGraphOutput(g, y);
    for (const ir::Op* user : y->users) {
      const size_t u = index.at(user);
      read_outside = read_outside || kind[u] == Kind::kNone || comp.Find(u) != root;
    }
    if (read_outside) converted[root] += static_cast<double>(y->bytes());
  }
  auto chosen = [&](size_t i) {
    const size_t root = comp.Find(i);
    return kind[i] != Kind::kNone && flops[root] > 0 &&
           flops[root] >= kFlopsPerConvertedByte * converted[root];
  };

  std::unordered_map<ir::Value*, ir::Value*> twin;  // NHWC value -> the same tensor blocked
  auto to_blocked = [&](ir::Value* v) {
    auto it = twin.find(v);
    if (it != twin.end()) return it->second;
    const Shape& s = v->shape();
    ir::Value* r = g.Add1("reshape", {v}, {{"shape", Shape{s[0], s[1], s[2], s[3] / kB, kB}}},
                          v->name + ".split_channels");
    ir::Value* t = g.Add1("transpose", {r}, {{"perm", std::vector<int64_t>{0, 3, 1, 2, 4}}},
                          v->name + ".nchw8c");
    t->name = v->name + ".nchw8c";
    twin[v] = t;
    return t;
  };
  int rewrites = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!chosen(i)) continue;
    ir::Op* op = ops[i];
    std::vector<ir::Value*> ins = op->inputs;
    ir::AttrMap attrs = op->attrs;
    g.SetInsertionPoint(op);
    for (size_t k = 0; k < ins.size(); ++k) {
      if (IsActivationInput(*op, kind[i], k)) ins[k] = to_blocked(ins[k]);
    }
    if (kind[i] == Kind::kConv || kind[i] == Kind::kPool)
      attrs.Set("data_format", std::string(ir::kBlockedFormat));
    if (kind[i] == Kind::kConcat) attrs.Set("axis", int64_t{1});
    ir::Value* y = op->outputs[0];
    const Shape s = y->shape();
    ir::Value* yb = g.Add1(op->type, ins, attrs, op->name);
    yb->name = y->name + ".nchw8c";
    ir::Value* t = g.Add1("transpose", {yb}, {{"perm", std::vector<int64_t>{0, 2, 3, 1, 4}}},
                          op->name + ".nhwc");
    ir::Value* back = g.Add1("reshape", {t}, {{"shape", s}}, op->name + ".nhwc");
    g.SetInsertionPoint(nullptr);
    back->name = y->name;
    g.ReplaceAllUses(y, back);
    twin[back] = yb;
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::cpu
