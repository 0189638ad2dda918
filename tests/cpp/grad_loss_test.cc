// Gradient rules of the loss ops against finite differences (grad_check.h).
// Labels are constants fixed by each test, so ignored rows and ignore_index
// hits are certain to occur.
#include "grad_check.h"

namespace tiller::passes {
namespace {

using namespace grad_check;  // NOLINT: the helpers of this test family

TEST(Gradients, CrossEntropyHardLabelsWithIgnoreIndex) {
  // On probabilities directly (rows need not sum to 1 for the rule) ...
  CheckGradient(
      [](Graph& g, auto& in) {
        Value* label = Const<int64_t>(g, DType::kI64, {4, 1}, {2, 1, 0, 4});
        return Op1(g, "cross_entropy", {in[0], label}, {{"axis", -1}, {"ignore_index", 1}});
      },
      {{{4, 5}, 0.2f, 1.f}});
  // ... behind softmax (softmax_with_cross_entropy), over a middle axis.
  CheckGradient(
      [](Graph& g, auto& in) {
        Value* label = Const<int32_t>(g, DType::kI32, {2, 1, 3}, {0, 3, 2, -100, 1, 3});
        Value* prob = Op1(g, "softmax", {in[0]}, {{"axis", 1}});
        return Op1(g, "cross_entropy", {prob, label}, {{"axis", 1}});
      },
      {{{2, 4, 3}, -2, 2}});
}

TEST(Gradients, CrossEntropyOnLogProbabilities) {
  // log_input (training's softmax_with_cross_entropy): log_softmax feeding
  // cross_entropy, hard labels with an ignored row, and soft labels.
  CheckGradient(
      [](Graph& g, auto& in) {
        Value* label = Const<int64_t>(g, DType::kI64, {4, 1}, {2, 1, 0, 4});
        Value* lp = Op1(g, "log_softmax", {in[0]}, {{"axis", -1}});
        return Op1(g, "cross_entropy", {lp, label},
                   {{"axis", -1}, {"ignore_index", 1}, {"log_input", true}});
      },
      {{{4, 5}, -2, 2}});
  CheckGradient(
      [](Graph& g, auto& in) {
        Value* lp = Op1(g, "log_softmax", {in[0]}, {{"axis", -1}});
        return Op1(g, "cross_entropy", {lp, in[1]},
                   {{"axis", -1}, {"soft_label", true}, {"log_input", true}});
      },
      {{{3, 4}, -2, 2}, {{3, 4}, 0.f, 1.f}});
}

TEST(Gradients, CrossEntropyOnLogProbabilitiesStaysFiniteWhenAProbabilityUnderflows) {
  // The label's probability is exp(-200), 0 in float: through softmax the
  // rule would divide by it; through log_softmax the gradient is softmax -
  // onehot. The shifted logit stops at -64 as in Paddle's CPU kernels (its
  // loss here is 64, its gradient exp(-64) for the third logit: checked
  // against paddle 3.3.1).
  auto g = std::make_unique<Graph>();
  Value* x = g->AddInput("x", {DType::kF32, {1, 3}});
  Value* label = Const<int64_t>(*g, DType::kI64, {1, 1}, {0});
  Value* lp = g->Add1("log_softmax", {x}, {{"axis", -1}});
  Value* loss = g->Add1("cross_entropy", {lp, label}, {{"axis", -1}, {"log_input", true}});
  Value* total =
      g->Add1("reduce_sum", {loss}, {{"axes", std::vector<int64_t>{}}, {"keepdim", false}});
  g->AddOutput("loss", total);
  auto grads = BuildBackward(*g, total, {x});
  g->AddOutput("dx", grads.at(x));
  auto exe = compile::Executable::Build(std::move(g), {});
  float xs[3] = {0.f, 200.f, 0.f};
  std::memcpy(exe->inputs()[0].data, xs, sizeof(xs));
  exe->Run();
  EXPECT_FLOAT_EQ(static_cast<const float*>(exe->outputs()[0].data)[0], 64.f);
  const float* dx = static_cast<const float*>(exe->outputs()[1].data);
  EXPECT_FLOAT_EQ(dx[0], -1.f);
  EXPECT_FLOAT_EQ(dx[1], 1.f);
  EXPECT_FLOAT_EQ(dx[2], std::exp(-64.f));
}

TEST(Gradients, CrossEntropySoftLabels) {
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "cross_entropy", {in[0], in[1]}, {{"axis", -1}, {"soft_label", true}});
      },
      {{{3, 4}, 0.2f, 1.f}, {{3, 4}, 0.f, 1.f}});
}

TEST(Gradients, SigmoidCrossEntropyNormalizeIgnorePosWeight) {
  // Labels in [0, 1] plus two at ignore_index -1.
  std::vector<float> labels = {0.f, 1.f, 0.3f, -1.f, 1.f, 0.f, 0.7f, 1.f, -1.f, 0.f, 0.5f, 1.f};
  for (bool normalize : {false, true}) {
    for (bool pos_weight : {false, true}) {
      SCOPED_TRACE(testing::Message() << "normalize " << normalize << " pos_weight " << pos_weight);
      std::vector<InputSpec> specs{{{3, 4}, -3, 3}};
      if (pos_weight) specs.push_back({{3, 4}, 0.5f, 2.f, DType::kF32, false});
      CheckGradient(
          [&](Graph& g, auto& in) {
            std::vector<Value*> ins{in[0], Const<float>(g, DType::kF32, {3, 4}, labels)};
            if (pos_weight) ins.push_back(in[1]);
            return Op1(g, "sigmoid_cross_entropy", ins,
                       {{"normalize", normalize}, {"ignore_index", -1}});
          },
          specs);
    }
  }
}

TEST(Gradients, BceKLDivHuberRankLoss) {
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "bce", {in[0], in[1]});
      },
      {{{3, 4}, 0.05f, 0.95f}, {{3, 4}, 0.f, 1.f}});
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "kldiv", {in[0], in[1]});
      },
      {{{3, 4}, -2.f, 0.f}, {{3, 4}, 0.1f, 1.f}});
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "kldiv", {in[0], in[1]}, {{"log_target", true}});
      },
      {{{3, 4}, -2.f, 0.f}, {{3, 4}, -2.f, 0.f}});
  // A target <= 0 contributes nothing and passes no gradient to x.
  CheckGradient(
      [](Graph& g, auto& in) {
        Value* t = Const<float>(g, DType::kF32, {4}, {0.5f, 0.f, -0.2f, 0.3f});
        return Op1(g, "kldiv", {in[0], t});
      },
      {{{4}, -2.f, 0.f}});
  // x on a 0.25 grid over [-2, 2] and y = 0: no residual within h of delta = 1.1.
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "huber", {in[0], in[1]}, {{"delta", 1.1}});
      },
      {{{4, 4}, -2.f, 2.f, DType::kF32, true, true},
       {{4, 4}, 0.f, 0.f, DType::kF32, true, false, std::vector<float>(16, 0.f)}});
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "rank_loss", {in[0], in[1], in[2]});
      },
      {{{5}, 0.f, 1.f}, {{5}, -2.f, 2.f}, {{5}, -2.f, 2.f}});
}

}  // namespace
}  // namespace tiller::passes
