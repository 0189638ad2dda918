/* Custom ops: kernels for Paddle op types Tiller does not know, written by a
 * user in a shared library loaded at run time (the analogue of Paddle's
 * IpuStrategy.add_custom_op).
 *
 * The interface is plain C so a library built by another compiler, or
 * against another Tiller version with the same TILLER_CUSTOM_OP_ABI, keeps
 * working. A library exports one function:
 *
 *   int TillerCustomOps(int abi, const TillerCustomOpDef** defs, int* count);
 *
 * returning 0 and its op definitions when `abi` equals the version it was
 * built for (TILLER_CUSTOM_OP_ABI). Loading registers, per definition, a
 * translator for the Paddle op type: the op's inputs are taken from the
 * listed input slots (in that order), its outputs bound to the listed output
 * slots, and every Paddle attribute is visible through TillerAttrApi.
 * `infer` runs once per compile (shapes are static); `compute` runs on every
 * inference and must only write its outputs (buffers are planned by Tiller,
 * contiguous, row-major). Both return 0 on success, or non-zero after writing
 * a message into `err` (err_len bytes, NUL-terminated).
 *
 * examples/custom_op/ holds a complete library and its build line. */
#ifndef TILLER_CUSTOM_OP_H_
#define TILLER_CUSTOM_OP_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TILLER_CUSTOM_OP_ABI 1
#define TILLER_CUSTOM_MAX_RANK 8

/* Element types (values are part of the ABI). */
enum TillerCustomDType {
  TILLER_CUSTOM_F32 = 0,
  TILLER_CUSTOM_F64 = 1,
  TILLER_CUSTOM_I32 = 2,
  TILLER_CUSTOM_I64 = 3,
  TILLER_CUSTOM_BOOL = 4,
};

typedef struct TillerTensorType {
  int32_t dtype; /* TillerCustomDType */
  int32_t rank;  /* 0 ... TILLER_CUSTOM_MAX_RANK */
  int64_t dims[TILLER_CUSTOM_MAX_RANK];
} TillerTensorType;

/* The op's attributes (opaque). Getters return 1 and set *out when the
 * attribute exists with a compatible kind (bools read as ints; ints as
 * floats), else 0. Pointers stay valid for the whole call. */
typedef struct TillerAttrs TillerAttrs;
typedef struct TillerAttrApi {
  int (*get_int)(const TillerAttrs* a, const char* name, int64_t* out);
  int (*get_float)(const TillerAttrs* a, const char* name, double* out);
  int (*get_string)(const TillerAttrs* a, const char* name, const char** out);
  int (*get_ints)(const TillerAttrs* a, const char* name, const int64_t** out, int64_t* count);
  int (*get_floats)(const TillerAttrs* a, const char* name, const double** out, int64_t* count);
} TillerAttrApi;

typedef struct TillerCustomOpDef {
  const char* paddle_type; /* e.g. "my_add_relu" */
  int num_inputs;
  const char* const* input_slots; /* e.g. {"X", "Y"}; an empty slot passes NULL */
  int num_outputs;
  const char* const* output_slots; /* e.g. {"Out"} */
  /* Output types from input types (inputs[i].rank == -1 for an absent input). */
  int (*infer)(const TillerTensorType* inputs, int num_inputs, const TillerAttrs* attrs,
               const TillerAttrApi* api, TillerTensorType* outputs, char* err, size_t err_len);
  int (*compute)(const TillerTensorType* input_types, const void* const* inputs, int num_inputs,
                 const TillerTensorType* output_types, void* const* outputs, int num_outputs,
                 const TillerAttrs* attrs, const TillerAttrApi* api, char* err, size_t err_len);
} TillerCustomOpDef;

typedef int (*TillerCustomOpsFn)(int abi, const TillerCustomOpDef** defs, int* count);

/* Loads a custom-op library into this process (C entry point, also usable
 * through ctypes/dlsym). Returns 0, or non-zero with a message in `err`.
 * Loading the same path again is a no-op. */
int TillerLoadCustomOpLibrary(const char* path, char* err, size_t err_len);

#ifdef __cplusplus
} /* extern "C" */

#include <string>

namespace tiller {
/* Loads a custom-op library; throws tiller::Error naming the path and the
 * reason (missing file, no TillerCustomOps, ABI mismatch, op type already
 * known). Libraries listed in the environment variable TILLER_CUSTOM_OPS
 * (':'-separated) are loaded when the Tiller library is. */
void LoadCustomOpLibrary(const std::string& path);
}  // namespace tiller
#endif

#endif /* TILLER_CUSTOM_OP_H_ */
