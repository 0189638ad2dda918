// A custom-op library for Tiller: the Paddle op type "my_add_relu"
// (Out = leaky_relu(X + Y, alpha), X and Y float32 of one shape; attribute
// `alpha`, default 0). Build (see README.md):
//   g++ -std=c++17 -O2 -shared -fPIC -I<tiller>/include my_add_relu.cc -o libmy_add_relu.so
#include <cstdio>

#include "tiller/custom_op.h"

namespace {

const char* const kInputs[] = {"X", "Y"};
const char* const kOutputs[] = {"Out"};

int Infer(const TillerTensorType* in, int n_in, const TillerAttrs* /*attrs*/,
          const TillerAttrApi* /*api*/, TillerTensorType* out, char* err, size_t err_len) {
  if (n_in != 2 || in[0].rank < 0 || in[1].rank != in[0].rank) {
    std::snprintf(err, err_len, "my_add_relu needs X and Y of one rank");
    return 1;
  }
  for (int d = 0; d < in[0].rank; ++d) {
    if (in[0].dims[d] != in[1].dims[d]) {
      std::snprintf(err, err_len, "my_add_relu: X and Y differ in dim %d", d);
      return 1;
    }
  }
  if (in[0].dtype != TILLER_CUSTOM_F32 || in[1].dtype != TILLER_CUSTOM_F32) {
    std::snprintf(err, err_len, "my_add_relu supports float32 only");
    return 1;
  }
  out[0] = in[0];
  return 0;
}

int Compute(const TillerTensorType* in_types, const void* const* in, int /*n_in*/,
            const TillerTensorType* /*out_types*/, void* const* out, int /*n_out*/,
            const TillerAttrs* attrs, const TillerAttrApi* api, char* /*err*/, size_t /*err_len*/) {
  double alpha = 0.0;
  api->get_float(attrs, "alpha", &alpha);
  int64_t n = 1;
  for (int d = 0; d < in_types[0].rank; ++d) n *= in_types[0].dims[d];
  const float* x = static_cast<const float*>(in[0]);
  const float* y = static_cast<const float*>(in[1]);
  float* o = static_cast<float*>(out[0]);
  float a = static_cast<float>(alpha);
  for (int64_t i = 0; i < n; ++i) {
    float s = x[i] + y[i];
    o[i] = s > 0 ? s : a * s;
  }
  return 0;
}

const TillerCustomOpDef kOps[] = {
    {"my_add_relu", 2, kInputs, 1, kOutputs, Infer, Compute},
};

}  // namespace

extern "C" int TillerCustomOps(int abi, const TillerCustomOpDef** defs, int* count) {
  if (abi != TILLER_CUSTOM_OP_ABI) return 1;
  *defs = kOps;
  *count = 1;
  return 0;
}
