// Optimizer update kernels run in place: with every output bound to the
// input it updates (the training compiler's binding), each kernel gives
// bit-identical results to a run with separate output buffers, on small
// tensors and on ones large enough for the multi-threaded path. Also the
// schema's operand checks. Agreement with Paddle's own kernels is tested in
// tests/python/optimizer_ops_test.py.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backends/cpu/kernel.h"
#include "core/error.h"
#include "ir/graph.h"
#include "ir/ops/optimizer.h"

namespace tiller::cpu {
namespace {

using ir::AttrMap;
using ir::Graph;
using ir::Value;

// Initial contents of each input: per-element ones get random values (kept
// positive for second-moment state), one-element ones a fixed scalar.
enum class Init { kNormal, kPositive, kScalar };

struct OperandSpec {
  Init init;
  double scalar = 0;
};

struct OptCase {
  std::string name;
  std::string type;
  std::vector<OperandSpec> operands;  // (param, grad, lr, state...)
  AttrMap attrs;
};

const OperandSpec kN{Init::kNormal}, kP{Init::kPositive};
OperandSpec Scalar(double v) {
  return {Init::kScalar, v};
}

std::vector<OptCase> Cases() {
  const OperandSpec lr = Scalar(0.05), b1p = Scalar(0.81), b2p = Scalar(0.998);
  return {
      {"sgd", "sgd", {kN, kN, lr}, {}},
      {"momentum", "momentum", {kN, kN, lr, kN}, {{"mu", 0.9}}},
      {"momentum_nesterov_l2",
       "momentum",
       {kN, kN, lr, kN},
       {{"mu", 0.9}, {"use_nesterov", true}, {"l2_decay", 0.01}}},
      {"adam", "adam", {kN, kN, lr, kN, kP, b1p, b2p}, {{"beta1", 0.9}, {"beta2", 0.999}}},
      {"adam_amsgrad", "adam", {kN, kN, lr, kN, kP, b1p, b2p, kP}, {}},
      {"adamw", "adam", {kN, kN, lr, kN, kP, b1p, b2p}, {{"weight_decay", 0.1}, {"lr_ratio", 0.5}}},
      {"adam_global_pow", "adam", {kN, kN, lr, kN, kP, b1p, b2p}, {{"update_beta_pow", false}}},
      {"adamax", "adamax", {kN, kN, lr, kN, kP, Scalar(0.729)}, {}},
      {"lamb", "lamb", {kN, kN, lr, kN, kP, b1p, b2p}, {{"weight_decay", 0.01}}},
      {"lamb_no_decay", "lamb", {kN, kN, lr, kN, kP, b1p, b2p}, {{"weight_decay", 0.0}}},
      {"adagrad", "adagrad", {kN, kN, lr, kP}, {}},
      {"adadelta", "adadelta", {kN, kN, lr, kP, kP}, {}},
      {"rmsprop", "rmsprop", {kN, kN, lr, kP, kN}, {{"momentum", 0.9}}},
      // mean_grad stays small so mean_square - mean_grad^2 > 0.
      {"rmsprop_centered", "rmsprop", {kN, kN, lr, kP, kN, Scalar(0)}, {{"momentum", 0.5}}},
  };
}

// gtest prints a failing parameter by name rather than as raw bytes.
void PrintTo(const OptCase& c, std::ostream* os) {
  *os << c.name;
}

struct Built {
  Graph graph;
  ir::Op* op = nullptr;
  std::vector<std::vector<float>> inputs;
};

std::unique_ptr<Built> Build(const OptCase& c, const Shape& shape) {
  auto b = std::make_unique<Built>();
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0, 1);
  std::uniform_real_distribution<float> positive(0.01f, 1.0f);
  std::vector<Value*> ins;
  int64_t n = NumElements(shape);
  for (size_t i = 0; i < c.operands.size(); ++i) {
    const OperandSpec& s = c.operands[i];
    // Per-element operands take param's shape; lr and beta powers are [1].
    // The centered rmsprop's mean_grad (Scalar(0) marker) is per-element.
    bool per_element = s.init != Init::kScalar || (c.name == "rmsprop_centered" && i == 5);
    Shape sh = per_element ? shape : Shape{1};
    std::vector<float> data(per_element ? n : 1);
    for (float& x : data) {
      if (s.init == Init::kNormal) x = normal(rng);
      if (s.init == Init::kPositive) x = positive(rng);
      if (s.init == Init::kScalar)
        x = per_element ? 0.01f * normal(rng) : static_cast<float>(s.scalar);
    }
    ins.push_back(b->graph.AddInput("in" + std::to_string(i), {DType::kF32, sh}));
    b->inputs.push_back(std::move(data));
  }
  b->op = b->graph.AddOp(c.type, ins, c.attrs);
  return b;
}

// Runs the op's kernel; `in_place` binds output k to the buffer of the input
// it updates. Returns the outputs' contents.
std::vector<std::vector<float>> RunKernel(const Built& b, bool in_place) {
  auto kernel = CreateKernel(*b.op);
  std::vector<std::vector<float>> ins = b.inputs;  // copies: in-place runs overwrite them
  std::vector<std::vector<float>> outs;
  KernelArgs args;
  for (auto& v : ins) args.inputs.push_back(v.data());
  for (size_t k = 0; k < b.op->outputs.size(); ++k) {
    if (in_place) {
      args.outputs.push_back(ins[ir::OptimizerUpdatedInput(k)].data());
    } else {
      outs.emplace_back(NumElements(b.op->outputs[k]->shape()), -123.0f);
      args.outputs.push_back(outs.back().data());
    }
  }
  AlignedBuffer ws(kernel->workspace_bytes());
  args.workspace = ws.data();
  kernel->Run(args);
  if (!in_place) return outs;
  std::vector<std::vector<float>> got;
  for (size_t k = 0; k < b.op->outputs.size(); ++k)
    got.push_back(ins[ir::OptimizerUpdatedInput(k)]);
  return got;
}

class OptimizerInPlace : public ::testing::TestWithParam<OptCase> {};

TEST_P(OptimizerInPlace, MatchesSeparateBuffers) {
  // 7 x 13 has a vector tail; 300 x 257 is past the parallel threshold.
  for (const Shape& shape : {Shape{7, 13}, Shape{300, 257}}) {
    auto b = Build(GetParam(), shape);
    auto separate = RunKernel(*b, false);
    auto in_place = RunKernel(*b, true);
    ASSERT_EQ(separate.size(), in_place.size());
    for (size_t k = 0; k < separate.size(); ++k) {
      ASSERT_EQ(separate[k].size(), in_place[k].size());
      EXPECT_EQ(0, std::memcmp(separate[k].data(), in_place[k].data(), separate[k].size() * 4))
          << "output " << k << " of " << ShapeToString(shape);
      // Every output was written (no -123 fill left) and is finite.
      for (float x : separate[k]) ASSERT_TRUE(std::isfinite(x) && x != -123.0f) << "output " << k;
    }
    // The parameter moved.
    EXPECT_NE(0, std::memcmp(separate[0].data(), b->inputs[0].data(), separate[0].size() * 4));
  }
}

INSTANTIATE_TEST_SUITE_P(All, OptimizerInPlace, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

TEST(OptimizerSchema, OutputsFollowUpdatedInputs) {
  for (const OptCase& c : Cases()) {
    auto b = Build(c, {4, 5});
    ASSERT_TRUE(ir::IsOptimizerOp(c.type));
    for (size_t k = 0; k < b->op->outputs.size(); ++k) {
      const Value* in = b->op->inputs[ir::OptimizerUpdatedInput(k)];
      EXPECT_EQ(b->op->outputs[k]->type.ToString(), in->type.ToString()) << c.name << " " << k;
    }
  }
  EXPECT_FALSE(ir::IsOptimizerOp("add"));
}

void ExpectFails(const std::string& type, const std::vector<ir::TensorType>& types,
                 const std::string& needle) {
  Graph g;
  std::vector<Value*> ins;
  for (size_t i = 0; i < types.size(); ++i)
    ins.push_back(g.AddInput("v" + std::to_string(i), types[i]));
  try {
    g.AddOp(type, ins);
    ADD_FAILURE() << type << ": expected an error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(type), std::string::npos) << e.what();
  }
}

TEST(OptimizerSchema, RejectsMismatchedOperands) {
  const ir::TensorType p{DType::kF32, {4, 5}}, one{DType::kF32, {1}};
  ExpectFails("sgd", {p, {DType::kF32, {5, 4}}, one}, "grad");
  ExpectFails("sgd", {p, p, {DType::kF32, {2}}}, "lr must hold one element");
  ExpectFails("momentum", {p, p, one, {DType::kF64, {4, 5}}}, "dtype float32");
  ExpectFails("adam", {p, p, one, p, p, p, one}, "one element");
  ExpectFails("sgd", {{DType::kI32, {4}}, {DType::kI32, {4}}, {DType::kI32, {1}}},
              "float32 or float64");
}

}  // namespace
}  // namespace tiller::cpu
