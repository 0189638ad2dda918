#include "backends/cpu/dnnl_context.h"

#include "core/error.h"

namespace tiller::cpu {

dnnl::engine& DnnlEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& DnnlStream() {
  static dnnl::stream stream(DnnlEngine());
  return stream;
}

dnnl::memory::data_type ToDnnl(DType t) {
  using dt = dnnl::memory::data_type;
  switch (t) {
    case DType::kF32: return dt::f32;
    case DType::kF16: return dt::f16;
    case DType::kBF16: return dt::bf16;
    case DType::kI32: return dt::s32;
    case DType::kI8: return dt::s8;
    case DType::kU8: return dt::u8;
    default: Fail(ErrorKind::kUnimplemented, "oneDNN has no data type for {}", DTypeName(t));
  }
}

}  // namespace tiller::cpu
