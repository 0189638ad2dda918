// Synthetic inputs for `tiller info` and `tiller bench`: the shapes that run
// (given, or declared with --batch / --seq-len for dynamic dims) and values
// any model accepts.
#pragma once

#include <cstdint>

#include "cli_args.h"
#include "tiller/predictor.h"

namespace tiller::tools {

// The shapes an inference run feeds: --shape's, else the declared dims with
// a dynamic first dim from --batch and a dynamic second from --seq-len.
struct FeedShapes {
  ShapeMap dims;              // every input of the model
  bool batch_used = false;    // --batch filled a dynamic first dim
  bool seq_len_used = false;  // --seq-len filled a dynamic second dim
};

// Throws kInvalidArgument for an input with a dynamic dim past the second
// that --shape does not give.
FeedShapes ResolveShapes(inference::Predictor& p, const ShapeMap& given, int64_t batch,
                         int64_t seq_len);

// Reshapes every input and fills it: integers alternate 0/1 (valid ids and
// type ids for any vocabulary), floats are uniform in [-1, 1).
void FillSynthetic(inference::Predictor& p, const FeedShapes& shapes);

}  // namespace tiller::tools
