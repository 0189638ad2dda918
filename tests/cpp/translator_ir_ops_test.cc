// The IR ops each Paddle translator declares (translate.h), which `tiller ops`
// prints with the dtypes of their kernels: every translator declares them,
// every declared type is a real IR op, and translation refuses an IR op its
// translator did not declare. The op harness (tests/python) runs every
// translator through that check.
#include <gtest/gtest.h>

#include "core/error.h"
#include "frontend/paddle/translate.h"
#include "ir/op_schema.h"

namespace tiller::paddle {
namespace {

TEST(TranslatorIrOps, EveryTranslatorDeclaresKnownIrOps) {
  std::string undeclared;
  for (const std::string& type : SupportedPaddleOps()) {
    const std::vector<std::string>* ir = TranslatorIrOps(type);
    if (!ir) {
      undeclared += " " + type;
      continue;
    }
    for (const std::string& t : *ir) EXPECT_NE(ir::FindOpSchema(t), nullptr) << type << ": " << t;
  }
  EXPECT_EQ(undeclared, "") << "translators registered without their IR ops";
}

void EmitAbs(TranslateContext& ctx, const OpDesc& op) {
  ctx.SetOut(op, "Out", ctx.Add1(op, "abs", {ctx.In(op, "X")}));
}

const bool kRegistered = [] {
  RegisterTranslator("translator_ir_ops_test_declared", EmitAbs, {"abs"});
  RegisterTranslator("translator_ir_ops_test_wrong", EmitAbs, {"relu"});
  return true;
}();

TEST(TranslatorIrOps, TranslationRefusesAnUndeclaredIrOp) {
  ASSERT_TRUE(kRegistered);
  Program program;
  program.path = "test.pdmodel";
  ir::Graph graph;
  TranslateContext ctx(program, graph);
  ctx.Bind("x", graph.AddInput("x", {DType::kF32, {3}}));
  OpDesc ok{"translator_ir_ops_test_declared", {{"X", {"x"}}}, {{"Out", {"y"}}}, {}, 0};
  (*FindTranslator(ok.type))(ctx, ok);
  EXPECT_NE(ctx.Lookup("y"), nullptr);
  OpDesc bad{"translator_ir_ops_test_wrong", {{"X", {"x"}}}, {{"Out", {"z"}}}, {}, 1};
  try {
    (*FindTranslator(bad.type))(ctx, bad);
    FAIL() << "an undeclared IR op was emitted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
    std::string m = e.what();
    EXPECT_NE(m.find("translator_ir_ops_test_wrong"), std::string::npos) << m;
    EXPECT_NE(m.find("IR op abs"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace tiller::paddle
