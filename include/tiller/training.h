// Tiller's training API: compiles a Paddle training program (forward + loss
// + optimizer.minimize, PIR .json or legacy .pdmodel) into one training step
// and runs it. Paddle's backward ops are dropped and rebuilt by Tiller's
// autodiff; the optimizer ops the program holds update the state in place.
//
//   tiller::training::TrainingSession s("main.json", {"x", "label"}, {"mean_0.tmp_0"});
//   for (const auto& name : s.StateNames()) s.SetState(name, host_copy_of(name));
//   s.SetFeed("x", x_data, DataType::FLOAT32, {8, 3, 16, 16});
//   s.SetFeed("label", y_data, DataType::INT64, {8, 1});
//   s.Run();                              // forward, backward, update
//   s.GetFetch(0, &loss, sizeof(float));
//   s.GetState("fc_0.w_0", host_buffer, bytes);   // weights back to the host
//
// State is every persistable variable of the program: parameters, optimizer
// moments and beta powers, the learning-rate variable (set it before a step
// to follow a learning-rate schedule), batch-norm running statistics. It
// lives in the session across steps and across compilations for different
// feed shapes. Errors throw tiller::Error naming the file, op or tensor.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tiller/error.h"
#include "tiller/predictor.h"

namespace tiller::training {

using inference::DataType;

struct SessionOptions {
  int num_threads = 1;
  // Seed of random ops (dropout masks, random init ops) whose own seed is 0.
  uint64_t random_seed = 0;
  // Check every op's output for NaN/Inf (Paddle's FLAGS_check_nan_inf); the
  // first one stops the step naming the step number and the op. Off, the
  // loss and every gradient are checked as they are computed, before any
  // update reads them; a non-finite one stops the step (parameters and
  // optimizer state untouched) and the step is re-run with the full check
  // to name the first op that went non-finite.
  bool check_nan_inf = false;
  // Adam, AdamW and Lamb without bias correction (the IPU option
  // use_no_bias_optimizer).
  bool no_bias_optimizer = false;
};

struct TensorInfo {
  std::string name;
  DataType dtype = DataType::FLOAT32;
  std::vector<int64_t> shape;
};

class TrainingSession {
 public:
  // program_path: a training program saved by paddle.static.save (.json or
  // .pdmodel) or serialized from a live program. feed_names: the variables
  // fed each step (the program's data ops, in the order SetFeed expects);
  // fetch_names: variables returned by each step (usually the loss).
  TrainingSession(const std::string& program_path, std::vector<std::string> feed_names,
                  std::vector<std::string> fetch_names, const SessionOptions& options = {});
  ~TrainingSession();
  TrainingSession(const TrainingSession&) = delete;
  TrainingSession& operator=(const TrainingSession&) = delete;

  // Persistable variables the step reads or writes, with their types.
  std::vector<TensorInfo> StateInfo() const;
  std::vector<std::string> StateNames() const;
  // The variable the program minimizes, and the variables it trains.
  const std::string& LossName() const;
  std::vector<std::string> TrainedNames() const;
  // Training steps run so far (eval steps not counted).
  int64_t StepCount() const;

  // Copies `bytes` of host data into a state; dtype and element count must
  // match the program's declaration.
  void SetState(const std::string& name, const void* data, DataType dtype, size_t bytes);
  void GetState(const std::string& name, void* data, size_t bytes) const;

  // Feeds for the next step, by position in feed_names or by name.
  void SetFeed(const std::string& name, const void* data, DataType dtype,
               const std::vector<int64_t>& shape);
  // One step. eval = true runs the forward part only, in test mode (dropout
  // off, running statistics), without gradients or updates.
  void Run(bool eval = false);
  // Fetch i of the last step.
  TensorInfo FetchInfo(size_t i) const;
  void GetFetch(size_t i, void* data, size_t bytes) const;
  const std::vector<std::string>& FetchNames() const;
  const std::vector<std::string>& FeedNames() const;

  struct Summary {
    size_t arena_bytes = 0;  // activations, gradients, workspace of the step
    size_t state_bytes = 0;  // parameters and optimizer state
    size_t in_place_updates = 0, copied_updates = 0;
    std::string graph;           // the compiled step, one op per line
    std::string compile_report;  // what each compile stage changed
  };
  Summary GetSummary() const;  // of the step run last

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tiller::training
