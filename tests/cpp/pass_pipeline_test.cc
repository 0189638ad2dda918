// passes/pipeline.h: a pipeline of passes as data (conditions, order
// requirements checked when built, nesting, records) and the compile
// driver's pipelines built from it (compile/compile_pipeline.h).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "compile/compile_pipeline.h"
#include "compile/driver.h"
#include "passes/pipeline.h"
#include "tiller/error.h"

namespace tiller::passes {
namespace {

// A pass that appends its name to `log` and returns `rewrites`.
std::unique_ptr<Pass> Logging(const std::string& name, std::vector<std::string>* log,
                              int rewrites = 1) {
  return std::make_unique<LambdaPass>(
      name, "logs its name", [name, log, rewrites](ir::Graph&, const PassContext&, std::string*) {
        log->push_back(name);
        return rewrites;
      });
}

TEST(PassPipeline, RunsEnabledEntriesInOrderAndNestedPipelinesAsOnePass) {
  std::vector<std::string> log;
  auto inner = std::make_unique<PassPipeline>("inner", "nested");
  inner->Add(Logging("b", &log));
  inner->Add(Logging("c", &log), [](const PassContext& ctx) { return ctx.training; });
  PassPipeline p("outer", "test");
  p.Add(Logging("a", &log));
  p.Add(std::move(inner));
  p.Add(Logging("d", &log), PassPipeline::After({"b"}));
  EXPECT_EQ(p.PassNames(), (std::vector<std::string>{"a", "b", "c", "d"}));

  ir::Graph g;
  PassContext inference;
  EXPECT_EQ(p.Run(g, inference), 3);
  EXPECT_EQ(log, (std::vector<std::string>{"a", "b", "d"}));
  EXPECT_EQ(p.Describe(inference), "a\ninner\n  b\n  c  (skipped)\nd\n");

  log.clear();
  PassContext training;
  training.training = true;
  std::vector<PassRecord> records = p.RunRecorded(g, training);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[2].name, "c");  // nested passes are recorded one by one
  EXPECT_EQ(log, (std::vector<std::string>{"a", "b", "c", "d"}));
}

TEST(PassPipeline, RefusesAnOrderItsPassesForbidWhenBuilt) {
  std::vector<std::string> log;
  {
    // "late" must follow "early": adding "early" after it is refused.
    PassPipeline p("p", "test");
    p.Add(Logging("late", &log), PassPipeline::After({"early"}));
    try {
      p.Add(Logging("early", &log));
      FAIL() << "early added after late";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("early must run before late"), std::string::npos)
          << e.what();
    }
  }
  {
    // The same through a nested pipeline holding "early".
    PassPipeline p("p", "test");
    p.Add(Logging("late", &log), PassPipeline::After({"early"}));
    auto nested = std::make_unique<PassPipeline>("nested", "holds early");
    nested->Add(Logging("early", &log));
    EXPECT_THROW(p.Add(std::move(nested)), Error);
  }
  {
    PassPipeline p("p", "test");
    p.Add(Logging("twice", &log));
    EXPECT_THROW(p.Add(Logging("twice", &log)), Error);
  }
  EXPECT_TRUE(log.empty());  // building runs nothing
}

TEST(PassPipeline, RecordsAnIdleQuietPassOnlyWhenItRewrote) {
  std::vector<std::string> log;
  PassPipeline p("p", "test");
  PassPipeline::Options quiet;
  quiet.record_idle = false;
  p.Add(Logging("idle", &log, 0), quiet);
  p.Add(Logging("busy", &log, 2), quiet);
  p.Add(Logging("always", &log, 0));
  ir::Graph g;
  std::vector<PassRecord> records = p.RunRecorded(g, PassContext{});
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].name, "busy");
  EXPECT_EQ(records[0].rewrites, 2);
  EXPECT_EQ(records[1].name, "always");
  EXPECT_EQ(log.size(), 3u);
}

TEST(PassPipeline, OptimizationPipelineHoldsTheOptimizationPassesInOrder) {
  const std::vector<std::string> names = OptimizationPipeline()->PassNames();
  std::vector<std::string> listed;
  for (const auto& pass : OptimizationPasses()) listed.push_back(pass->name());
  EXPECT_EQ(names, listed);
}

// Every combination of the options that decide the compile pipelines'
// entries builds (the order checks pass), and an entry's condition follows
// its option.
TEST(CompilePipeline, BuildsForEveryOptionCombinationAndSkipsWhatIsOff) {
  backend::Backend* cpu = backend::FindBackend("cpu");
  ASSERT_NE(cpu, nullptr);
  std::unique_ptr<backend::Device> device = cpu->CreateDevice(0, {});
  const std::vector<backend::Device*> devices{device.get()};
  for (int bits = 0; bits < 64; ++bits) {
    compile::CompileOptions o;
    o.optimize = bits & 1;
    o.recompute.enabled = bits & 2;
    o.precision = (bits & 4) ? compile::Precision::kBFloat16 : compile::Precision::kFloat32;
    o.stochastic_rounding = bits & 8;
    o.replicas = (bits & 16) ? 2 : 1;
    o.collectives.shard_optimizer_state = bits & 32;
    compile::CompiledStep step;
    std::unique_ptr<PassPipeline> rewrites = compile::RewritePipeline(o, devices, &step);
    std::unique_ptr<PassPipeline> placement = compile::PlacementPipeline(o, devices, 0, &step);
    const PassContext ctx = compile::PipelineContext(devices, /*training=*/true);
    const std::string d = rewrites->Describe(ctx);
    SCOPED_TRACE(d);
    auto skipped = [&d](const std::string& pass) {
      const size_t at = d.find(pass + "\n");
      return at == std::string::npos && d.find(pass + "  (skipped)") != std::string::npos;
    };
    EXPECT_EQ(skipped("recompute"), !o.recompute.enabled);
    EXPECT_EQ(skipped("mixed_precision"), o.precision == compile::Precision::kFloat32);
    EXPECT_EQ(skipped("stochastic_rounding"), !o.stochastic_rounding);
    EXPECT_EQ(skipped("shard_optimizer_state"),
              !(o.replicas > 1 && o.collectives.shard_optimizer_state));
    EXPECT_EQ(skipped("optimize"), !o.optimize);
    EXPECT_NE(placement->Describe(ctx).find("insert_copies\n"), std::string::npos);
  }
}

}  // namespace
}  // namespace tiller::passes
