// IR graph building, shape inference errors, dead-code removal, folding hooks.
#include <gtest/gtest.h>

#include "core/error.h"
#include "ir/graph.h"
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

TEST(IrGraph, InfersBroadcastAndMatmulShapes) {
  Graph g;
  Value* a = g.AddInput("a", {DType::kF32, {2, 1, 4, 8}});
  Value* b = g.AddInput("b", {DType::kF32, {3, 8, 5}});
  Value* c = g.Add1("matmul", {a, b});
  EXPECT_EQ(c->shape(), (Shape{2, 3, 4, 5}));
  Value* d = g.Add1("add", {c, g.AddInput("bias", {DType::kF32, {5}})});
  EXPECT_EQ(d->shape(), (Shape{2, 3, 4, 5}));
  Value* t = g.Add1("matmul", {a, g.AddInput("w", {DType::kF32, {5, 8}})}, {{"transpose_b", true}});
  EXPECT_EQ(t->shape(), (Shape{2, 1, 4, 5}));
  Verify(g);
}

TEST(IrGraph, ShapeErrorsNameTheOp) {
  Graph g;
  Value* a = g.AddInput("a", {DType::kF32, {2, 3}});
  Value* b = g.AddInput("b", {DType::kF32, {4}});
  try {
    g.AddOp("add", {a, b}, {}, "elementwise_add #3");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("elementwise_add #3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(g.Add1("reshape", {a}, {{"shape", std::vector<int64_t>{5}}}), Error);
  EXPECT_THROW(g.Add1("transpose", {a}, {{"perm", std::vector<int64_t>{0, 0}}}), Error);
  EXPECT_THROW(g.Add1("cast", {a}, {{"dtype", std::string("complex")}}), Error);
}

TEST(IrGraph, SliceFollowsPythonSemantics) {
  Graph g;
  Value* a = g.AddInput("a", {DType::kF32, {10, 6}});
  AttrMap attrs{{"axes", std::vector<int64_t>{0, 1}},
                {"starts", std::vector<int64_t>{-3, 100}},
                {"ends", std::vector<int64_t>{1000, -100}},
                {"steps", std::vector<int64_t>{1, -2}}};
  EXPECT_EQ(g.Add1("slice", {a}, attrs)->shape(), (Shape{3, 3}));
}

TEST(IrGraph, RemoveDeadCodeKeepsInputsAndOutputs) {
  Graph g;
  Value* a = g.AddInput("a", {DType::kF32, {4}});
  Value* unused_in = g.AddInput("unused", {DType::kF32, {4}});
  Value* r = g.Add1("relu", {a});
  g.Add1("exp", {a});  // dead
  g.AddOutput("out", r);
  g.RemoveDeadCode();
  EXPECT_EQ(g.ops().size(), 1u);
  EXPECT_EQ(g.inputs().size(), 2u);
  EXPECT_EQ(g.inputs()[1], unused_in);
  EXPECT_EQ(a->users.size(), 1u);
  Verify(g);
}

TEST(IrGraph, FolderTurnsConstantOpsIntoData) {
  Graph g;
  int calls = 0;
  g.set_folder([&](Graph&, Op& op) {
    ++calls;
    auto buf = std::make_shared<AlignedBuffer>(op.outputs[0]->bytes());
    op.outputs[0]->data = buf;
    op.outputs[0]->kind = ValueKind::kConstant;
  });
  auto data = std::make_shared<AlignedBuffer>(16);
  Value* c = g.AddData("c", {DType::kF32, {4}}, ValueKind::kConstant, data);
  Value* p = g.AddData("p", {DType::kF32, {4}}, ValueKind::kParam, data);
  Value* folded = g.Add1("relu", {c});
  Value* kept = g.Add1("relu", {p});
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(folded->is_constant());
  EXPECT_EQ(folded->producer, nullptr);
  EXPECT_FALSE(kept->is_constant());
  EXPECT_EQ(g.ops().size(), 1u);
}

TEST(IrGraph, InsertionPointKeepsTopologicalOrder) {
  Graph g;
  Value* a = g.AddInput("a", {DType::kF32, {4}});
  Value* r = g.Add1("relu", {a});
  Op* last = g.ops().back().get();
  g.SetInsertionPoint(last);
  Value* e = g.Add1("exp", {a});
  g.SetInsertionPoint(nullptr);
  EXPECT_EQ(g.ops().front()->outputs[0], e);
  EXPECT_EQ(g.ops().back()->outputs[0], r);
  Verify(g);
}

TEST(IrSchemas, EveryOpHasInference) {
  for (const auto& name : AllOpSchemaNames()) {
    const OpSchema* s = FindOpSchema(name);
    ASSERT_TRUE(s->infer) << name;
    EXPECT_LE(s->min_inputs, s->max_inputs) << name;
  }
  EXPECT_GT(AllOpSchemaNames().size(), 60u);
}

// ir/opcode.h: the opcode list and the op schemas are the same set, so an op
// renamed in one and not the other fails here (and code comparing opcodes
// fails to build).
TEST(Opcodes, TheListAndTheRegisteredSchemasAreTheSameSet) {
  std::vector<std::string> unlisted;
  for (const std::string& name : AllOpSchemaNames()) {
    const OpSchema* s = FindOpSchema(name);
    if (s->opcode == Opcode::kUnlisted) {
      unlisted.push_back(name);
      continue;
    }
    EXPECT_EQ(OpcodeName(s->opcode), name);
  }
  // Only the schemas the C++ tests register for themselves are unlisted.
  for (const std::string& name : unlisted)
    EXPECT_TRUE(name.starts_with("arch_test_") || name.starts_with("kernel_dtypes_test_"))
        << name << " is registered but missing from TILLER_OPCODES (ir/opcode.h)";
  for (size_t i = 0; i < static_cast<size_t>(Opcode::kUnlisted); ++i) {
    const std::string name(OpcodeName(static_cast<Opcode>(i)));
    EXPECT_NE(FindOpSchema(name), nullptr)
        << name << " is in TILLER_OPCODES (ir/opcode.h) but no schema registers it";
    EXPECT_EQ(OpcodeOf(name), static_cast<Opcode>(i));
  }
  EXPECT_EQ(OpcodeOf("no_such_op"), Opcode::kUnlisted);
  EXPECT_EQ(OpcodeName(Opcode::kUnlisted), "");
}

TEST(Opcodes, AddOpSetsTheOpcodeFromTheSchema) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {2, 3}});
  Op* op = g.Add1("relu", {x})->producer;
  EXPECT_EQ(op->opcode, Opcode::relu);
  EXPECT_TRUE(op->is(Opcode::relu));
  EXPECT_FALSE(op->is(Opcode::tanh));
}

}  // namespace
}  // namespace tiller::ir

namespace tiller::ir {
namespace {

TEST(IrGraph, RemoveDeadCodeKeepsUnusedOutputsOfLiveOps) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {4, 6}});
  Op* split = g.AddOp("split", {x}, {{"axis", 1}, {"sections", std::vector<int64_t>{2, 4}}});
  g.AddOutput("first", split->outputs[0]);  // the second output is never used
  g.RemoveDeadCode();
  ASSERT_EQ(g.ops().size(), 1u);
  bool second_alive = false;
  for (const auto& v : g.values()) second_alive = second_alive || v.get() == split->outputs[1];
  EXPECT_TRUE(second_alive);
  EXPECT_EQ(split->outputs[1]->shape(), (Shape{4, 4}));
  Verify(g);
}

}  // namespace
}  // namespace tiller::ir
