// A training run's feeds and fetches (training_feeds_fetches.h).
#include "runtime/training_feeds_fetches.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/error.h"

namespace tiller::runtime {

using training::SessionOptions;

namespace {

template <typename T>
void AddInto(std::byte* sum, const std::byte* value, size_t bytes) {
  T* s = reinterpret_cast<T*>(sum);
  const T* v = reinterpret_cast<const T*>(value);
  for (size_t e = 0; e < bytes / sizeof(T); ++e) s[e] += v[e];
}

}  // namespace

void FillSyntheticFeeds(const FeedSet& feeds, const SessionOptions& options,
                        compile::Executable& exe, int64_t step_index) {
  using Mode = SessionOptions::SyntheticData;
  for (size_t i = 0; i < feeds.size(); ++i) {
    compile::TensorSlot& slot = exe.inputs()[i];
    const size_t bytes = slot.type.bytes();
    if (!bytes) continue;
    const bool draw = options.synthetic_data_mode == Mode::kRandomNormal &&
                      (slot.type.dtype == DType::kF32 || slot.type.dtype == DType::kF64);
    if (!draw) {
      std::memset(slot.data, 0, bytes);
      continue;
    }
    // A stream per (seed, micro-batch, feed): runs repeat, and micro-batches
    // differ.
    std::mt19937_64 rng(options.random_seed ^ (static_cast<uint64_t>(step_index) << 16) ^ i);
    std::normal_distribution<double> normal(0.0, 1.0);
    const size_t n = static_cast<size_t>(NumElements(slot.type.shape));
    if (slot.type.dtype == DType::kF32) {
      float* p = static_cast<float*>(slot.data);
      for (size_t e = 0; e < n; ++e) p[e] = static_cast<float>(normal(rng));
    } else {
      double* p = static_cast<double*>(slot.data);
      for (size_t e = 0; e < n; ++e) p[e] = normal(rng);
    }
  }
}

std::string NonFiniteFeed(const FeedSet& feeds, int n, int k) {
  for (size_t i = 0; i < feeds.size(); ++i) {
    const DType t = feeds.decl(i).dtype;
    if (t != DType::kF32 && t != DType::kF64) continue;
    const AlignedBuffer& data = feeds.data(i);
    const size_t size = DTypeSize(t), count = data.size() / size / static_cast<size_t>(n);
    const std::byte* at = data.data() + static_cast<size_t>(k) * count * size;
    for (size_t e = 0; e < count; ++e) {
      const double v = t == DType::kF32 ? double{reinterpret_cast<const float*>(at)[e]}
                                        : reinterpret_cast<const double*>(at)[e];
      if (!std::isfinite(v))
        return fmt::format("; feed '{}' holds {} at element {}{}", feeds.decl(i).name, v, e,
                           n > 1 ? fmt::format(" of micro-batch {}", k + 1) : std::string());
    }
  }
  return "";
}

void ApplyAnchors(const SessionOptions& options, const compile::Executable& exe,
                  const std::vector<std::string>& fetch_names, std::vector<AlignedBuffer>& fetched,
                  std::vector<ir::TensorType>& fetch_types) {
  using Anchor = SessionOptions::Anchor;
  if (options.anchor == Anchor::kAll) return;
  const int batches = options.batches_per_step, accumulate = options.accumulation.factor,
            n_replicas = options.replicas;
  // Micro-batch (b, g, r) sits at ((b * G) + g) * R + r.
  auto index = [&](int b, int g, int r) { return (b * accumulate + g) * n_replicas + r; };
  for (size_t i = 0; i < fetched.size(); ++i) {
    const ir::TensorType& micro = exe.outputs()[i].type;
    const size_t bytes = micro.bytes();
    const std::byte* all = fetched[i].data();
    AlignedBuffer out;
    Shape shape = micro.shape;
    if (options.anchor == Anchor::kEveryN) {
      const int n = options.anchor_period, kept = batches / n;
      out.Resize(bytes * kept * accumulate * n_replicas);
      std::byte* dst = out.data();
      for (int b = n - 1; b < batches; b += n) {
        const size_t run = bytes * accumulate * n_replicas;
        std::memcpy(dst, all + bytes * index(b, 0, 0), run);
        dst += run;
      }
      if (options.batches_per_step > 1) shape.insert(shape.begin(), kept);
      if (options.accumulation.enabled) shape.insert(shape.begin(), accumulate);
    } else {
      out.Resize(bytes * n_replicas);
      for (int r = 0; r < n_replicas; ++r) {
        std::byte* dst = out.data() + bytes * r;
        if (options.anchor == Anchor::kFinal) {
          std::memcpy(dst, all + bytes * index(batches - 1, accumulate - 1, r), bytes);
          continue;
        }
        for (int b = 0; b < batches; ++b) {
          for (int g = 0; g < accumulate; ++g) {
            const std::byte* v = all + bytes * index(b, g, r);
            switch (micro.dtype) {
              case DType::kF32:
                AddInto<float>(dst, v, bytes);
                break;
              case DType::kF64:
                AddInto<double>(dst, v, bytes);
                break;
              case DType::kI32:
                AddInto<int32_t>(dst, v, bytes);
                break;
              case DType::kI64:
                AddInto<int64_t>(dst, v, bytes);
                break;
              default:
                Fail(ErrorKind::kInvalidArgument,
                     "anchor_return_type 'sum' of fetch '{}' ({}): only numeric fetches sum",
                     fetch_names[i], micro.ToString());
            }
          }
        }
      }
    }
    if (options.replicated_graphs) shape.insert(shape.begin(), n_replicas);
    fetched[i] = std::move(out);
    fetch_types[i] = {micro.dtype, shape};
  }
}

}  // namespace tiller::runtime
