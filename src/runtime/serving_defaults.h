// Defaults of a predictor that serves requests, written once for the
// predictor that applies them and Config's summary and messages that name
// them.
#pragma once

namespace tiller::runtime {

// A lone device's keep-warm window in ms (backend::DeviceOptions::
// keep_warm_ms; Config::SetCpuKeepWarmMs(-1)): MobileNetV3 at batch 1
// served at Poisson arrivals (bench_serving.py, 2 threads, Xeon with AMX)
// had p50 11.5 ms at 5% load with its threads asleep between requests,
// 4.2 ms with 100 ms of keep-warm (2.9 ms back to back), and met issue 46's
// bounds against ONNX Runtime at every load. A predictor with several
// devices gets 0: its devices' teams would spin against each other.
inline constexpr int kServingKeepWarmMs = 100;

}  // namespace tiller::runtime
