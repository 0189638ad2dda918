// The Paddle frontend as the compile driver's StepSource (compile/driver.h):
// an inference step (the whole program), a training or eval step (the
// forward part, Tiller's backward, the program's update ops) and a gradient
// query (the program's loss differentiated, gradients as outputs).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compile/driver.h"
#include "frontend/paddle/program.h"
#include "frontend/paddle/training.h"
#include "frontend/paddle/translate.h"

namespace tiller::runtime {

class PaddleInferenceStep : public compile::StepSource {
 public:
  PaddleInferenceStep(const paddle::Model& model, std::vector<ir::TensorType> feeds,
                      paddle::TranslateOptions options)
      : model_(model), feeds_(std::move(feeds)), options_(options) {}
  Forward BuildForward(ir::Graph::Folder folder) override;
  std::unique_ptr<ir::Graph> Finish() override { return std::move(graph_); }

 private:
  const paddle::Model& model_;
  std::vector<ir::TensorType> feeds_;
  paddle::TranslateOptions options_;
  std::unique_ptr<ir::Graph> graph_;
};

class PaddleTrainingStep : public compile::StepSource {
 public:
  struct Args {
    const paddle::Program* program;
    const paddle::TrainingProgramInfo* info;
    const std::map<std::string, ir::TensorType>* state_types;
    std::vector<std::string> feed_names;
    std::vector<ir::TensorType> feed_types;
    std::vector<std::string> fetch_names;
    paddle::TrainingGraphOptions options;
  };
  explicit PaddleTrainingStep(Args args) : args_(std::move(args)) {}
  Forward BuildForward(ir::Graph::Folder folder) override;
  std::vector<ir::Value*> BuildUpdate(const std::vector<ir::Value*>& gradients) override;
  std::unique_ptr<ir::Graph> Finish() override;

 private:
  Args args_;
  std::unique_ptr<paddle::TrainingTranslation> t_;
  std::vector<ir::Value*> read_gradients_;
};

// d sum(loss [* weight]) / d wrt, with the gradients appended to the outputs
// (after the loss and the other fetches) named "<wrt>@GRAD".
class PaddleGradientStep : public compile::StepSource {
 public:
  PaddleGradientStep(const paddle::Model& model, std::vector<ir::TensorType> feeds,
                     paddle::TranslateOptions options, std::vector<std::string> wrt,
                     std::shared_ptr<AlignedBuffer> loss_weight)
      : model_(model),
        feeds_(std::move(feeds)),
        options_(options),
        wrt_(std::move(wrt)),
        loss_weight_(std::move(loss_weight)) {}
  Forward BuildForward(ir::Graph::Folder folder) override;
  std::vector<ir::Value*> BuildUpdate(const std::vector<ir::Value*>& gradients) override;
  std::unique_ptr<ir::Graph> Finish() override;

 private:
  const paddle::Model& model_;
  std::vector<ir::TensorType> feeds_;
  paddle::TranslateOptions options_;
  std::vector<std::string> wrt_;
  std::shared_ptr<AlignedBuffer> loss_weight_;
  std::unique_ptr<ir::Graph> graph_;
  std::vector<ir::Value*> targets_;
};

}  // namespace tiller::runtime
