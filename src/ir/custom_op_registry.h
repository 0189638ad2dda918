// Custom-op libraries loaded into this process (include/tiller/custom_op.h):
// the op definitions by Paddle op type, and the attribute accessor handed to
// a library's infer/compute functions. It sits in the IR layer so that the
// frontend (translation), the IR `custom` op and every backend's kernel can
// read it; the loader (dlopen) lives in the runtime.
#pragma once

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "ir/attribute.h"
#include "tiller/custom_op.h"

// The opaque attribute handle of the C ABI: a view of an IR op's attributes.
struct TillerAttrs {
  const tiller::ir::AttrMap* map;
};

namespace tiller::custom_op {

// The definition registered for a Paddle op type; nullptr when none.
const TillerCustomOpDef* Find(const std::string& paddle_type);
// (Paddle op type, library path) of every loaded custom op, sorted by type.
std::vector<std::pair<std::string, std::string>> Loaded();
// Records a definition from `library` (the loader checked it). Call with
// RegistryMutex() held.
void Register(const TillerCustomOpDef* def, const std::string& library);
// Serializes loading against lookups.
std::mutex& RegistryMutex();
// Reads ir::AttrMap through the C ABI.
const TillerAttrApi* AttrApi();

// DType <-> TillerCustomDType; false when the type has no ABI value.
bool ToAbi(DType t, int32_t* out);
bool FromAbi(int32_t t, DType* out);

}  // namespace tiller::custom_op
