// The training session's state tensors (training_state.h) and how it stores
// each persistable (StoredStateTypes, replica_options.h).
#include "runtime/training_state.h"

#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "frontend/paddle/state_roles.h"
#include "runtime/replica_options.h"

namespace tiller::runtime {

void StateTensor::Store(const void* value) {
  if (type.dtype == declared) {
    if (type.bytes()) std::memcpy(data.data(), value, type.bytes());
    return;
  }
  const auto* in = static_cast<const float*>(value);
  auto* out = reinterpret_cast<uint16_t*>(data.data());
  for (int64_t i = 0, n = NumElements(type.shape); i < n; ++i) out[i] = FloatToHalf(in[i]);
}

void StateTensor::Load(void* value) const {
  if (type.dtype == declared) {
    if (type.bytes()) std::memcpy(value, data.data(), type.bytes());
    return;
  }
  const auto* in = reinterpret_cast<const uint16_t*>(data.data());
  auto* out = static_cast<float*>(value);
  for (int64_t i = 0, n = NumElements(type.shape); i < n; ++i) out[i] = HalfToFloat(in[i]);
}

std::map<std::string, ir::TensorType> StoredStateTypes(
    const paddle::Program& program, const std::vector<std::string>& state,
    const std::array<std::string, 3>& accl_types) {
  const std::map<std::string, int> accumulators = paddle::OptimizerAccumulators(program);
  std::map<std::string, ir::TensorType> out;
  for (const std::string& name : state) {
    const paddle::VarInfo* v = program.FindVar(name);
    if (!v) Fail(ErrorKind::kDataLoss, "{}: persistable '{}' has no variable", program.path, name);
    ir::TensorType t{v->dtype, v->dims};
    auto acc = accumulators.find(name);
    if (acc != accumulators.end() && accl_types[acc->second - 1] == "FLOAT16" &&
        t.dtype == DType::kF32)
      t.dtype = DType::kF16;
    out[name] = t;
  }
  return out;
}

}  // namespace tiller::runtime
