// Config's IPU settings (Paddle Inference's EnableIpu, SetIpuConfig,
// SetIpuCustomInfo, LoadIpuConfig): checked as they are set; the predictor
// runs them (predictor.cc). The other settings are in config.cc.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>

#include "core/error.h"
#include "tiller/predictor.h"

namespace tiller::inference {

void Config::EnableIpu(int ipu_device_num, int ipu_micro_batch_size, bool ipu_enable_pipelining,
                       int ipu_batches_per_step) {
  if (ipu_device_num < 1 || ipu_micro_batch_size < 1 || ipu_batches_per_step < 1)
    Fail(ErrorKind::kInvalidArgument,
         "EnableIpu: ipu_device_num ({}), ipu_micro_batch_size ({}) and ipu_batches_per_step ({}) "
         "must be >= 1",
         ipu_device_num, ipu_micro_batch_size, ipu_batches_per_step);
  if (ipu_enable_pipelining && ipu_device_num < 2)
    Fail(ErrorKind::kInvalidArgument,
         "EnableIpu: pipelining needs the model sharded over more than one device "
         "(ipu_device_num >= 2)");
  if (ipu_enable_pipelining && ipu_batches_per_step < ipu_device_num)
    Fail(ErrorKind::kInvalidArgument,
         "EnableIpu: pipelining needs ipu_batches_per_step ({}) >= ipu_device_num ({}): one "
         "micro-batch per stage at least",
         ipu_batches_per_step, ipu_device_num);
  ipu_.enabled = true;
  ipu_.device_num = ipu_device_num;
  ipu_.micro_batch_size = ipu_micro_batch_size;
  ipu_.pipeline.enabled = ipu_enable_pipelining;
  ipu_.batches_per_step = ipu_batches_per_step;
}

void Config::SetIpuConfig(bool ipu_enable_fp16, int ipu_replica_num,
                          float ipu_available_memory_proportion, bool ipu_enable_half_partial,
                          bool /*ipu_enable_model_runtime_executor: no effect*/) {
  if (ipu_enable_half_partial)
    Fail(ErrorKind::kUnimplemented,
         "SetIpuConfig: ipu_enable_half_partial (half precision accumulation) is not implemented "
         "by Tiller; ipu_enable_fp16 alone multiplies in half precision with float32 "
         "accumulation");
  if (ipu_replica_num < 1)
    Fail(ErrorKind::kInvalidArgument, "SetIpuConfig: ipu_replica_num must be >= 1, got {}",
         ipu_replica_num);
  if (!(ipu_available_memory_proportion > 0.0f && ipu_available_memory_proportion <= 1.0f))
    Fail(ErrorKind::kInvalidArgument,
         "SetIpuConfig: ipu_available_memory_proportion must be in (0, 1], got {}",
         ipu_available_memory_proportion);
  ipu_.enabled = true;
  ipu_.replica_num = ipu_replica_num;
  if (ipu_enable_fp16) SetPrecision("half");
}

namespace {

// Each IPU custom op is [paddle_op, popart_op, domain, version]; fail(message)
// throws.
void CheckCustomOps(const std::vector<std::vector<std::string>>& ops, const auto& fail) {
  for (const auto& entry : ops) {
    if (entry.size() != 4)
      fail(fmt::format("a custom op is [paddle_op, popart_op, domain, version], got {} field(s)",
                       entry.size()));
  }
}

std::string Lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// "[[a, b, c], [d, e]]" (spaces already removed) -> {{a, b, c}, {d, e}}.
std::vector<std::vector<std::string>> ParseNestedList(const std::string& text, const auto& fail) {
  // fail(message) throws.
  if (text.size() < 2 || text.front() != '[' || text.back() != ']')
    fail(fmt::format("expected [[...], ...], got '{}'", text));
  std::vector<std::vector<std::string>> out;
  const std::string inner = text.substr(1, text.size() - 2);
  size_t pos = 0;
  while (pos < inner.size()) {
    if (inner[pos] == ',') {
      ++pos;
      continue;
    }
    if (inner[pos] != '[') fail(fmt::format("expected '[' at '{}'", inner.substr(pos)));
    const size_t end = inner.find(']', pos);
    if (end == std::string::npos) fail(fmt::format("unclosed '[' in '{}'", text));
    std::vector<std::string> fields;
    std::string field;
    for (size_t i = pos + 1; i <= end; ++i) {
      if (i == end || inner[i] == ',') {
        fields.push_back(field);
        field.clear();
      } else {
        field += inner[i];
      }
    }
    out.push_back(std::move(fields));
    pos = end + 1;
  }
  return out;
}

}  // namespace

void Config::SetIpuCustomInfo(const std::vector<std::vector<std::string>>& ipu_custom_ops_info,
                              const std::map<std::string, bool>& ipu_custom_patterns) {
  CheckCustomOps(ipu_custom_ops_info, [](const std::string& message) {
    Fail(ErrorKind::kInvalidArgument, "SetIpuCustomInfo: {}", message);
  });
  ipu_.custom_ops_info = ipu_custom_ops_info;
  ipu_.custom_patterns = ipu_custom_patterns;
}

void Config::LoadIpuConfig(const std::string& config_path) {
  std::ifstream in(config_path);
  if (!in) Fail(ErrorKind::kNotFound, "LoadIpuConfig: cannot open '{}'", config_path);
  // Start from the current settings; apply only if the whole file is valid.
  Config next = *this;
  IpuSettings& ipu = next.ipu_;
  bool fp16 = precision_.compute == "half", half_partial = false;
  float memory_proportion = 1.0f;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    auto fail = [&](const std::string& message) {
      Fail(ErrorKind::kInvalidArgument, "{}:{}: {}", config_path, number, message);
    };
    std::erase_if(line, [](unsigned char c) { return std::isspace(c); });
    if (line.empty()) continue;
    const size_t comma = line.find(',');
    const std::string key = line.substr(0, comma);
    const std::string value = comma == std::string::npos ? "" : line.substr(comma + 1);
    auto to_int = [&]() {
      int v = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || end != value.data() + value.size())
        fail(fmt::format("expected an integer, got '{}'", value));
      return v;
    };
    auto to_bool = [&]() {
      const std::string v = Lowercase(value);
      if (v == "true" || v == "1") return true;
      if (v == "false" || v == "0") return false;
      fail(fmt::format("expected true or false, got '{}'", value));
      return false;
    };
    if (key == "ipu_device_num") {
      ipu.device_num = to_int();
    } else if (key == "ipu_micro_batch_size") {
      ipu.micro_batch_size = to_int();
    } else if (key == "ipu_enable_pipelining") {
      ipu.pipeline.enabled = to_bool();
    } else if (key == "ipu_batches_per_step") {
      ipu.batches_per_step = to_int();
    } else if (key == "ipu_enable_fp16") {
      fp16 = to_bool();
    } else if (key == "ipu_replica_num") {
      ipu.replica_num = to_int();
    } else if (key == "ipu_available_memory_proportion") {
      char* end = nullptr;
      memory_proportion = std::strtof(value.c_str(), &end);
      if (value.empty() || *end != '\0') fail(fmt::format("expected a number, got '{}'", value));
    } else if (key == "ipu_enable_half_partial") {
      half_partial = to_bool();
    } else if (key == "ipu_enable_model_runtime_executor") {
      to_bool();  // toolchain-only: validated, no effect
    } else if (key == "ipu_custom_ops_info") {
      ipu.custom_ops_info = ParseNestedList(value, fail);
      CheckCustomOps(ipu.custom_ops_info, fail);
    } else if (key == "ipu_custom_patterns") {
      ipu.custom_patterns.clear();
      for (const auto& entry : ParseNestedList(value, fail)) {
        if (entry.size() != 2) fail(fmt::format("a pattern is [name, true|false]: '{}'", value));
        const std::string flag = Lowercase(entry[1]);
        ipu.custom_patterns[entry[0]] = flag == "true" || flag == "1";
      }
    } else {
      fail(fmt::format(
          "unknown key '{}' in an IPU config (Paddle Inference's keys: ipu_device_num, "
          "ipu_micro_batch_size, ipu_enable_pipelining, ipu_batches_per_step, ipu_enable_fp16, "
          "ipu_replica_num, ipu_available_memory_proportion, ipu_enable_half_partial, "
          "ipu_enable_model_runtime_executor, ipu_custom_ops_info, ipu_custom_patterns)",
          key));
    }
  }
  // The same checks as the setters, naming the file.
  try {
    const bool enabled = ipu.enabled;
    next.EnableIpu(ipu.device_num, ipu.micro_batch_size, ipu.pipeline.enabled,
                   ipu.batches_per_step);
    next.SetIpuConfig(fp16, ipu.replica_num, memory_proportion, half_partial);
    next.ipu_.enabled = enabled;  // as Paddle: loading does not turn the IPU mode on
    if (!fp16 && next.precision_.compute == "half") next.precision_.compute = "float32";
  } catch (const Error& e) {
    Fail(e.kind(), "{}: {}", config_path, e.what());
  }
  *this = std::move(next);
}

}  // namespace tiller::inference
