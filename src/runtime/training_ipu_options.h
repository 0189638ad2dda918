// A training session's options from Paddle's IPU option names (IpuOptions,
// as IpuStrategy sets them) in Tiller's terms (SessionOptions): num_ipus
// into replicas and devices per replica, the sharding and pipelining modes,
// PopART's reduction and anchor types. Combinations IPU scripts get wrong
// (num_ipus and the replicas, the pipeline's depth) fail naming Paddle's
// options; SessionOptions' own checks come after (training_options_check.h).
#pragma once

#include "tiller/ipu_options.h"
#include "tiller/training.h"

namespace tiller::runtime {

training::SessionOptions FromIpuOptions(const training::IpuOptions& options);

}  // namespace tiller::runtime
