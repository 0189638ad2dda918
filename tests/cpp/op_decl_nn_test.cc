// Declarations of the nn, nn_ext, shape, loss, grad_ops, training and quantize op
// families (ir/ops/): every schema states its attributes, a precision and a
// layout rule; AddOp holds ops to them; the typed getters give the declared
// defaults; kernel signatures refuse the operand dtypes their factories do
// not dispatch on, naming them.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backends/cpu/kernel.h"
#include "core/error.h"
#include "ir/graph.h"
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

const std::vector<std::string> kOps = {
    // nn.cc
    "softmax", "log_softmax", "layer_norm", "batch_norm", "conv2d", "pool2d", "embedding",
    "embedding_grad", "embedding_grad_add",
    // nn_ext.cc
    "group_norm", "max_pool2d_with_index", "conv2d_transpose", "interp", "pad_nd",
    // shape.cc
    "reshape", "transpose", "slice", "concat", "split", "expand", "gather", "reduce_sum",
    "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin",
    // loss.cc
    "cross_entropy", "sigmoid_cross_entropy", "kldiv", "bce", "huber", "rank_loss", "ctc_loss",
    // grad_ops.cc
    "conv2d_grad_input", "conv2d_grad_filter", "pool2d_grad", "max_pool2d_with_index_grad",
    "batch_norm_grad", "cross_entropy_grad", "sigmoid_cross_entropy_grad", "gather_grad",
    "slice_grad", "interp_grad", "pad_nd_grad",
    // training.cc
    "batch_norm_train", "dropout",
    // quantize.cc
    "quantize_linear", "dequantize_linear", "linear_int8", "conv2d_int8"};

// Adding op `type` (as a translator of "paddle op #9" would) fails with a
// message naming the op, the Paddle op and `part`.
void ExpectRefused(Graph& g, const std::string& type, std::vector<Value*> ins, AttrMap attrs,
                   const char* part) {
  try {
    g.AddOp(type, std::move(ins), std::move(attrs), "paddle op #9");
    ADD_FAILURE() << type << " accepted " << part;
  } catch (const Error& e) {
    std::string m = e.what();
    for (const char* want : {type.c_str(), "paddle op #9", part})
      EXPECT_NE(m.find(want), std::string::npos) << "missing '" << want << "' in: " << m;
  }
}

TEST(OpDeclNn, EverySchemaDeclaresAttributesPrecisionAndLayout) {
  for (const std::string& name : kOps) {
    const OpSchema* s = FindOpSchema(name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_TRUE(s->attrs_declared) << name;
    EXPECT_FALSE(s->open_attrs) << name;
    EXPECT_NE(s->precision, PrecisionRule::kUndeclared) << name;
    EXPECT_NE(s->layout, LayoutRule::kUndeclared) << name;
    if (s->layout == LayoutRule::kAxisAttrs) {
      EXPECT_FALSE(s->axis_attrs.empty()) << name;
      for (const std::string& a : s->axis_attrs) EXPECT_NE(s->FindAttr(a), nullptr) << name << a;
    }
  }
}

// The gradient ops take the forward op's attributes with the same kinds and
// defaults, so a rule may hand the forward's attributes on unchanged.
TEST(OpDeclNn, GradientOpsDeclareTheirForwardsAttributesAlike) {
  struct Pair {
    const char *fwd, *grad;
    std::vector<std::string> own;  // the forward's attributes the gradient op lacks
  };
  const std::vector<Pair> pairs = {
      {"pool2d", "pool2d_grad", {"data_format"}},
      {"interp", "interp_grad", {"data_format"}},
      {"slice", "slice_grad", {}},
      {"pad_nd", "pad_nd_grad", {"value"}},
      {"conv2d", "conv2d_grad_input", {"activation", "out_dtype", "data_format", "algorithm"}},
      {"conv2d", "conv2d_grad_filter", {"activation", "out_dtype", "data_format", "algorithm"}},
      {"conv2d_transpose", "conv2d_grad_filter", {"output_size", "data_format"}},
      {"cross_entropy", "cross_entropy_grad", {"match"}},
      {"sigmoid_cross_entropy", "sigmoid_cross_entropy_grad", {}}};
  for (const Pair& p : pairs) {
    const OpSchema* g = FindOpSchema(p.grad);
    for (const AttrDecl& d : FindOpSchema(p.fwd)->attrs) {
      if (std::find(p.own.begin(), p.own.end(), d.name) != p.own.end()) continue;
      const AttrDecl* e = g->FindAttr(d.name);
      ASSERT_NE(e, nullptr) << p.grad << " lacks " << d.name;
      EXPECT_EQ(e->kind, d.kind) << p.grad << " " << d.name;
      EXPECT_TRUE(e->default_value == d.default_value) << p.grad << " " << d.name;
    }
  }
}

TEST(OpDeclNn, UndeclaredOrMistypedAttributesAreRefusedNamingThem) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {1, 2, 4, 4}});
  auto refused = [&](const std::string& type, AttrMap a, const char* part) {
    try {
      g.AddOp(type, {x}, std::move(a), "paddle op #3");
      ADD_FAILURE() << type << " accepted " << part;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInternal);
      std::string m = e.what();
      for (const char* p : {type.c_str(), "paddle op #3", part})
        EXPECT_NE(m.find(p), std::string::npos) << "missing '" << p << "' in: " << m;
    }
  };
  // pool2d's translator lowers global pooling: the IR op has no such attribute.
  refused("pool2d", {{"ksize", std::vector<int64_t>{2, 2}}, {"global_pooling", true}},
          "global_pooling");
  refused("softmax", {{"axis", std::string("last")}}, "axis");
  refused("reshape", {}, "shape");  // required
  refused("interp", {{"method", std::string("nearest")}}, "out_size");
}

// conv2d / pool2d / interp in NHWC read and write channel-last shapes; a bad layout
// name, a residual without a bias or of another type are refused naming the op.
TEST(OpDeclNn, ChannelLastConvAndPoolShapesAndTheirRefusals) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {2, 9, 7, 3}});  // N, H, W, C
  Value* w = g.AddInput("w", {DType::kF32, {5, 3, 3, 3}});  // OIHW
  Value* b = g.AddInput("b", {DType::kF32, {5}});
  const AttrMap nhwc = {{"data_format", std::string("NHWC")},
                        {"strides", std::vector<int64_t>{2, 2}},
                        {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  Value* y = g.Add1("conv2d", {x, w, b}, nhwc);
  EXPECT_EQ(y->shape(), (Shape{2, 5, 4, 5}));
  Value* r = g.AddInput("r", {DType::kF32, {2, 5, 4, 5}});
  EXPECT_EQ(g.Add1("conv2d", {x, w, b, r}, nhwc)->shape(), (Shape{2, 5, 4, 5}));
  Value* p = g.Add1("pool2d", {y},
                    {{"data_format", std::string("NHWC")},
                     {"pooling_type", std::string("max")},
                     {"ksize", std::vector<int64_t>{2, 2}},
                     {"strides", std::vector<int64_t>{2, 2}}});
  EXPECT_EQ(p->shape(), (Shape{2, 2, 2, 5}));
  const AttrMap up = {{"data_format", std::string("NHWC")},
                      {"method", std::string("linear")},
                      {"out_size", std::vector<int64_t>{8, 10}},
                      {"ratios", std::vector<double>{0.5, 0.5}}};
  EXPECT_EQ(g.Add1("interp", {y}, up)->shape(), (Shape{2, 8, 10, 5}));
  auto refused = [&](const std::string& type, std::vector<Value*> ins, AttrMap a,
                     const char* part) {
    ExpectRefused(g, type, std::move(ins), std::move(a), part);
  };
  refused("conv2d", {x, w}, {{"data_format", std::string("NDHWC")}}, "NDHWC");
  // Window values the kernels divide or step by (the translator refuses
  // them first, at load; the schemas hold for ops that passes build).
  const std::vector<std::pair<AttrMap, const char*>> windows = {
      {{{"strides", std::vector<int64_t>{1, 0}}}, "strides [1, 0]"},
      {{{"dilations", std::vector<int64_t>{0, 1}}}, "dilations [0, 1]"},
      {{{"pads", std::vector<int64_t>{0, -1, 0, 0}}}, "pads [0, -1, 0, 0]"},
      {{{"groups", int64_t{0}}}, "groups 0"},
  };
  for (const auto& [attrs, part] : windows) refused("conv2d", {x, w}, attrs, part);
  const AttrMap pool = {{"pooling_type", std::string("max")},
                        {"ksize", std::vector<int64_t>{2, 2}}};
  AttrMap pool_stride = pool, pool_k = pool;
  pool_stride.Set("strides", std::vector<int64_t>{0, 2});
  pool_k.Set("ksize", std::vector<int64_t>{2, 0});
  Value* nchw = g.AddInput("nchw", {DType::kF32, {2, 3, 9, 7}});
  refused("pool2d", {nchw}, pool_stride, "strides [0, 2]");
  refused("pool2d", {nchw}, pool_k, "ksize [2, 0]");
  refused("pool2d", {x},
          {{"data_format", std::string("CHWN")}, {"ksize", std::vector<int64_t>{2, 2}}}, "CHWN");
  // Channel-last resampling of one spatial dim (3-D) has no layout to name.
  Value* seq = g.AddInput("seq", {DType::kF32, {2, 3, 9}});
  AttrMap up1 = up;
  up1.Set("out_size", std::vector<int64_t>{18});
  up1.Set("ratios", std::vector<double>{0.5});
  refused("interp", {seq}, up1, "4-D");
  Value* r_small = g.AddInput("r_small", {DType::kF32, {2, 5, 4, 4}});
  refused("conv2d", {x, w, b, r_small}, nhwc, "residual");
  Value* r_half = g.AddInput("r_half", {DType::kBF16, {2, 5, 4, 5}});
  refused("conv2d", {x, w, b, r_half}, nhwc, "residual");
}

// The int8 GEMMs the int8 passes build: float32 results, int8 with
// out_scale (fuse_requantize), and what they refuse, naming it.
TEST(OpDeclNn, Int8GemmShapesAndTheirRefusals) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kI8, {2, 9, 7, 3}});  // N, H, W, C
  Value* w = g.AddInput("w", {DType::kI8, {6, 1, 3, 3}});  // depthwise x2
  Value* s = g.AddInput("s", {DType::kF32, {6}});
  Value* b = g.AddInput("b", {DType::kF32, {6}});
  const AttrMap nhwc = {{"data_format", std::string("NHWC")},
                        {"groups", int64_t{3}},
                        {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  Value* y = g.Add1("conv2d_int8", {x, w, s, b}, nhwc);
  EXPECT_EQ(y->type, (TensorType{DType::kF32, {2, 9, 7, 6}}));
  EXPECT_EQ(g.Add1("conv2d_int8", {x, w, s, b, y}, nhwc)->type, y->type);
  AttrMap requantized = nhwc;
  requantized.Set("out_scale", 42.0);
  EXPECT_EQ(g.Add1("conv2d_int8", {x, w, s, b}, requantized)->type,
            (TensorType{DType::kI8, {2, 9, 7, 6}}));
  Value* a = g.AddInput("a", {DType::kI8, {4, 5, 16}});
  Value* wl = g.AddInput("wl", {DType::kI8, {16, 6}});
  EXPECT_EQ(g.Add1("linear_int8", {a, wl, s, b})->type, (TensorType{DType::kF32, {4, 5, 6}}));
  EXPECT_EQ(g.Add1("linear_int8", {a, wl, s}, {{"out_scale", 3.0}})->type,
            (TensorType{DType::kI8, {4, 5, 6}}));
  auto refused = [&](const std::string& type, std::vector<Value*> ins, AttrMap a,
                     const char* part) {
    ExpectRefused(g, type, std::move(ins), std::move(a), part);
  };
  Value* xf = g.AddInput("xf", {DType::kF32, {2, 9, 7, 3}});
  refused("conv2d_int8", {xf, w, s}, nhwc, "int8");
  Value* s5 = g.AddInput("s5", {DType::kF32, {5}});
  refused("conv2d_int8", {x, w, s5}, nhwc, "scale");
  refused("conv2d_int8", {x, w, s, s5}, nhwc, "bias");
  refused("conv2d_int8", {x, w, s, b, y}, requantized, "residual");
  AttrMap negative = nhwc;
  negative.Set("out_scale", -1.0);
  refused("conv2d_int8", {x, w, s}, negative, "out_scale");
  Value* w7 = g.AddInput("w7", {DType::kI8, {6, 2, 3, 3}});
  refused("conv2d_int8", {x, w7, s}, nhwc, "channels");
  refused("linear_int8", {a, wl, s5}, {}, "scale");
  refused("linear_int8", {a, wl, s}, {{"out_scale", -2.0}}, "out_scale");
}

TEST(OpDeclNn, GettersGiveTheDeclaredDefaultsAndConvertKinds) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {2, 3, 4}});
  // axis as a whole float and keepdim as 0/1 convert to the declared kinds.
  Op* r = g.AddOp("reduce_sum", {x}, {{"axes", int64_t{1}}, {"keepdim", int64_t{1}}});
  EXPECT_EQ(r->output()->shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(r->GetInts("axes"), (std::vector<int64_t>{1}));
  EXPECT_TRUE(r->GetBool("keepdim"));
  Op* all = g.AddOp("reduce_mean", {x});  // axes [] (all), keepdim false
  EXPECT_EQ(all->output()->shape(), Shape{});
  Op* sm = g.AddOp("softmax", {x}, {{"axis", 1.0}});
  EXPECT_EQ(sm->GetInt("axis"), 1);
  Op* ln = g.AddOp("layer_norm", {x});
  EXPECT_EQ(ln->GetInt("axis"), -1);
  EXPECT_DOUBLE_EQ(ln->GetFloat("epsilon"), 1e-5);
  Op* sl = g.AddOp("slice", {x},
                   {{"axes", std::vector<int64_t>{2}},
                    {"starts", std::vector<int64_t>{1}},
                    {"ends", std::vector<int64_t>{4}}});  // steps [] = 1 per axis
  EXPECT_EQ(sl->output()->shape(), (Shape{2, 3, 3}));
  Value* img = g.AddInput("img", {DType::kF32, {1, 2, 5, 5}});
  Op* pool = g.AddOp("pool2d", {img}, {{"ksize", std::vector<int64_t>{2, 2}}});
  EXPECT_EQ(pool->GetStr("pooling_type"), "max");
  EXPECT_EQ(pool->output()->shape(), (Shape{1, 2, 4, 4}));  // strides [1, 1], no pads
  Verify(g);
}

TEST(OpDeclNn, SignaturesRefuseOperandDtypesNamingThem) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {4, 3}});
  Value* i16 = g.AddInput("idx16", {DType::kI16, {2}});
  auto refused = [&](Op* op, const char* part) {
    try {
      cpu::CheckKernelSupports(*op);
      ADD_FAILURE() << op->type << " accepted " << part;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnimplemented);
      std::string m = e.what();
      for (const char* p : {op->type.c_str(), part, "int16", "supported: int32, int64"})
        EXPECT_NE(m.find(p), std::string::npos) << "missing '" << p << "' in: " << m;
    }
  };
  // The schemas take any integer index; the kernels read int32 or int64.
  refused(g.AddOp("gather", {x, i16}, {{"axis", int64_t{0}}}), "idx16");
  Value* dy = g.AddInput("dy", {DType::kF32, {2, 3}});
  refused(g.AddOp("embedding_grad", {i16, dy}, {{"rows", int64_t{4}}}), "idx16");
  // Hard and soft labels pick different registrations of one op.
  Value* prob = g.AddInput("prob", {DType::kF32, {4, 3}});
  Value* hard = g.AddInput("hard", {DType::kI32, {4, 1}});
  EXPECT_NO_THROW(cpu::CheckKernelSupports(*g.AddOp("cross_entropy", {prob, hard})));
  EXPECT_NO_THROW(
      cpu::CheckKernelSupports(*g.AddOp("cross_entropy", {prob, prob}, {{"soft_label", true}})));
}

}  // namespace
}  // namespace tiller::ir
