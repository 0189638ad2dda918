// Tiller's gradients of a Paddle program's loss, for parity tests against
// paddle.static.gradients: the program is compiled with its backward graph
// (Tiller's autodiff) and run once.
//
//   tiller::GradientRequest r;
//   r.model_path = "net.json"; r.params_path = "net.pdiparams";
//   r.feeds["x"] = x;  r.wrt = {"fc_0.w_0", "x"};
//   tiller::GradientResult g = tiller::ComputeGradients(r);
//   g.gradients[0].second     // d sum(loss) / d fc_0.w_0
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tiller/data_type.h"
#include "tiller/error.h"

namespace tiller {

struct GradientRequest {
  std::string model_path, params_path;
  std::map<std::string, HostTensor> feeds;  // every feed of the program
  std::string loss_name;                    // a fetch target; "" when the program has one
  std::vector<std::string> wrt;             // parameters or feeds
  bool training = true;                     // ops in training mode (dropout, batch stats)
  std::vector<std::string> fetch;           // further variables to return
  int64_t step = 0;                         // the training step number (dropout masks)
  // If set (loss-shaped float32): differentiate sum(loss * loss_weight)
  // instead of sum(loss), so every element of a non-scalar output matters.
  std::optional<HostTensor> loss_weight;
  int num_threads = 1;
};

struct GradientResult {
  // (name, value) in request order: gradients by wrt name; fetched holds the
  // loss first, then `fetch`.
  std::vector<std::pair<std::string, HostTensor>> gradients;
  std::vector<std::pair<std::string, HostTensor>> fetched;
};

GradientResult ComputeGradients(const GradientRequest& request);

}  // namespace tiller
