#include "synthetic_feeds.h"

#include <fmt/format.h>
#include <immintrin.h>

#include <cstring>
#include <random>

namespace tiller::tools {
namespace {

template <typename... Args>
[[noreturn]] void Fail(ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(kind, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace

FeedShapes ResolveShapes(inference::Predictor& p, const ShapeMap& given, int64_t batch,
                         int64_t seq_len) {
  FeedShapes f;
  for (const std::string& name : p.GetInputNames()) {
    auto it = given.find(name);
    if (it != given.end()) {
      f.dims[name] = it->second;
      continue;
    }
    std::vector<int64_t> dims = p.GetInputShape(name);
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] >= 0) continue;
      if (i > 1)
        Fail(ErrorKind::kInvalidArgument,
             "input '{}' has dynamic dim {}: give it with --shape {}=...", name, i, name);
      dims[i] = i == 0 ? batch : seq_len;
      (i == 0 ? f.batch_used : f.seq_len_used) = true;
    }
    f.dims[name] = dims;
  }
  return f;
}

void FillSynthetic(inference::Predictor& p, const FeedShapes& shapes) {
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (const auto& name : p.GetInputNames()) {
    auto h = p.GetInputHandle(name);
    const std::vector<int64_t>& dims = shapes.dims.at(name);
    h->Reshape(dims);
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    switch (p.GetInputType(name)) {
      case inference::DataType::FLOAT32: {
        std::vector<float> v(n);
        for (auto& x : v) x = uni(rng);
        h->CopyFromCpu(v.data());
        break;
      }
      case inference::DataType::INT64: {
        std::vector<int64_t> v(n);
        for (int64_t i = 0; i < n; ++i) v[i] = i % 2;
        h->CopyFromCpu(v.data());
        break;
      }
      case inference::DataType::INT32: {
        std::vector<int32_t> v(n);
        for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(i % 2);
        h->CopyFromCpu(v.data());
        break;
      }
      case inference::DataType::BFLOAT16:
      case inference::DataType::FLOAT16: {
        // Half inputs (a model saved in bfloat16 / float16): the same
        // uniform values, rounded to nearest even into the half type.
        const bool bf16 = p.GetInputType(name) == inference::DataType::BFLOAT16;
        std::vector<uint16_t> v(n);
        for (auto& x : v) {
          const float f = uni(rng);
          uint32_t bits;
          std::memcpy(&bits, &f, 4);
          x = bf16 ? static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16)
                   : static_cast<uint16_t>(_cvtss_sh(f, 0));
        }
        h->CopyFromCpuBytes(v.data(), p.GetInputType(name), v.size() * sizeof(uint16_t));
        break;
      }
      default:
        Fail(ErrorKind::kUnimplemented, "bench: cannot synthesize input '{}' of type {}", name,
             inference::DataTypeName(p.GetInputType(name)));
    }
  }
}

}  // namespace tiller::tools
