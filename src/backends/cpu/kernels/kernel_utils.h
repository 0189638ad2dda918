// Helpers shared by the CPU kernels in this folder: dtype dispatch, OpenMP
// work splitting, strided/broadcast iteration plans computed at kernel
// creation, half-precision conversions and vectorized float math.
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/simd.h"
#include "core/error.h"
#include "core/half.h"
#include "ir/op_schema.h"

namespace tiller::cpu {

// Below this many elements a kernel runs on the calling thread: waking the
// OpenMP team costs more than the work.
constexpr int64_t kParallelThreshold = 32768;

// Rank limit of iteration plans after adjacent dims were merged; keeps plans
// in fixed arrays so Run() never allocates.
constexpr int kMaxDims = 8;

template <typename... Args>
[[noreturn]] void Unsupported(const ir::Op& op, fmt::format_string<Args...> format,
                              Args&&... args) {
  Fail(ErrorKind::kUnimplemented, "CPU kernel {} ({}): {}", op.type, op.name,
       fmt::format(format, std::forward<Args>(args)...));
}

inline DType InDType(const ir::Op& op, size_t i = 0) {
  return op.inputs[i]->dtype();
}
inline DType OutDType(const ir::Op& op, size_t i = 0) {
  return op.outputs[i]->dtype();
}

// A shape seen as [outer, n, inner] around the op's `axis` attribute: rows
// of n elements, inner apart. Rank 0 is one row of one element.
struct RowLayout {
  int64_t outer = 1, n = 1, inner = 1;
};

inline RowLayout AxisRows(const ir::Op& op, const Shape& s) {
  RowLayout l;
  int rank = static_cast<int>(s.size());
  if (rank == 0) return l;
  int axis = NormalizeAxis(op.GetInt("axis"), rank);
  if (axis < 0) Unsupported(op, "axis out of range");
  for (int d = 0; d < rank; ++d) {
    if (d < axis) l.outer *= s[d];
    if (d > axis) l.inner *= s[d];
  }
  l.n = s[axis];
  return l;
}

// What cross_entropy and its gradient read the same way: the class axis,
// soft or hard labels (the label operand's dtype must fit: float32, or an
// integer class index), log-probability input, the ignored class.
struct CrossEntropySpec {
  RowLayout rows;
  bool soft = false, log_input = false;
  int64_t ignore = -100;
  DType label = DType::kI64;
};

// Calls fn(r, base, label) for every row r (in parallel): base is the offset
// of the row's class 0 (its classes lie rows.inner apart), label its hard
// label (0 with soft labels).
template <typename Fn>
void ForEachCrossEntropyRow(const CrossEntropySpec& s, const void* labels, Fn fn) {
  const int64_t n = s.rows.n, inner = s.rows.inner;
  ParallelRange(
      s.rows.outer * inner, n * 4,
      [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          int64_t label = 0;
          if (!s.soft)
            label = s.label == DType::kI64 ? static_cast<const int64_t*>(labels)[r]
                                           : static_cast<const int32_t*>(labels)[r];
          fn(r, (r / inner) * n * inner + r % inner, label);
        }
      },
      1);
}

inline CrossEntropySpec ReadCrossEntropy(const ir::Op& op) {
  CrossEntropySpec s;
  s.rows = AxisRows(op, op.inputs[0]->shape());
  s.soft = op.GetBool("soft_label");
  s.log_input = op.GetBool("log_input");
  s.ignore = op.GetInt("ignore_index");
  s.label = InDType(op, 1);
  if (s.soft && s.label != DType::kF32) Unsupported(op, "soft label dtype {}", DTypeName(s.label));
  if (!s.soft && s.label != DType::kI64 && s.label != DType::kI32)
    Unsupported(op, "hard label dtype {}", DTypeName(s.label));
  return s;
}

// Splits [0, n) into one contiguous range per thread (multiples of `align`
// so vector loops keep their alignment) and calls f(begin, end) for each.
template <typename F>
void ParallelRange(int64_t n, int64_t work_per_item, F&& f, int64_t align = 16) {
  if (n <= 0) return;
  int threads = omp_get_max_threads();
  if (threads <= 1 || n * work_per_item < kParallelThreshold || n < 2) {
    f(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    int nt = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t chunk = (n + nt - 1) / nt;
    if (align > 1 && chunk > align) chunk = (chunk + align - 1) / align * align;
    int64_t b = std::min(n, chunk * t), e = std::min(n, b + chunk);
    if (b < e) f(b, e);
  }
}

// IEEE half and bfloat16 stored as raw bits (conversions: core/half.h).
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

// Calls f(T{}) with T the C++ type of `t`; returns false if `t` is not listed.
// Usage: DispatchDType<float, int64_t>(dtype, [&](auto tag) { using T = decltype(tag); ... }).
template <typename... Ts, typename F>
bool DispatchDType(DType t, F&& f) {
  bool done = false;
  auto one = [&](auto tag) {
    using T = decltype(tag);
    constexpr DType kT = std::is_same_v<T, float>     ? DType::kF32
                         : std::is_same_v<T, double>  ? DType::kF64
                         : std::is_same_v<T, int8_t>  ? DType::kI8
                         : std::is_same_v<T, uint8_t> ? DType::kU8
                         : std::is_same_v<T, int16_t> ? DType::kI16
                         : std::is_same_v<T, int32_t> ? DType::kI32
                         : std::is_same_v<T, int64_t> ? DType::kI64
                         : std::is_same_v<T, bool>    ? DType::kBool
                         : std::is_same_v<T, Half>    ? DType::kF16
                                                      : DType::kBF16;
    if (!done && t == kT) {
      f(T{});
      done = true;
    }
  };
  (one(Ts{}), ...);
  return done;
}

// An iteration over a contiguous output of `dims` reading up to three inputs
// through element strides (0 for broadcast dims, negative for reversed
// slices). Adjacent dims that every operand walks contiguously are merged at
// creation, so same-shape, scalar and row-bias broadcasts become one or two
// flat loops.
struct IterPlan {
  int rank = 1;
  int num_in = 0;
  std::array<int64_t, kMaxDims> dims{};
  std::array<std::array<int64_t, kMaxDims>, 3> strides{};
  std::array<int64_t, 3> base{};  // element offset of each input's first read
  int64_t total = 0;
  int64_t inner() const { return dims[rank - 1]; }
  int64_t inner_stride(int k) const { return strides[k][rank - 1]; }
};

// Plans and StridedCopy are defined in shape.cc; the vector math in unary.cc.

// Builds a plan from per-input strides aligned with `out`; throws through
// `op` if more than kMaxDims dims remain after merging.
IterPlan MakeIterPlan(const ir::Op& op, const Shape& out,
                      const std::vector<std::vector<int64_t>>& in_strides,
                      const std::vector<int64_t>& base = {});
// Plan for numpy broadcasting of each input shape to `out`.
IterPlan MakeBroadcastPlan(const ir::Op& op, const Shape& out, const std::vector<Shape>& ins);

// Walks output elements [begin, end) of `p` as runs along the innermost dim:
// f(out_offset, in_offsets, length), with in_offsets[k] the element offset of
// input k at the run's start.
template <typename F>
void ForEachRun(const IterPlan& p, int64_t begin, int64_t end, F&& f) {
  const int r = p.rank;
  const int64_t n = p.dims[r - 1];
  std::array<int64_t, kMaxDims> idx{};
  std::array<int64_t, 3> off = p.base;
  int64_t row = begin / n, col = begin % n;
  for (int d = r - 2; d >= 0; --d) {
    idx[d] = row % p.dims[d];
    row /= p.dims[d];
    for (int k = 0; k < p.num_in; ++k) off[k] += idx[d] * p.strides[k][d];
  }
  std::array<int64_t, 3> at{};
  for (int64_t pos = begin; pos < end;) {
    int64_t len = std::min(n - col, end - pos);
    for (int k = 0; k < p.num_in; ++k) at[k] = off[k] + col * p.strides[k][r - 1];
    f(pos, at.data(), len);
    pos += len;
    col = 0;
    for (int d = r - 2; d >= 0; --d) {
      for (int k = 0; k < p.num_in; ++k) off[k] += p.strides[k][d];
      if (++idx[d] < p.dims[d]) break;
      for (int k = 0; k < p.num_in; ++k) off[k] -= p.strides[k][d] * p.dims[d];
      idx[d] = 0;
    }
  }
}

// Copies elements of `elem_size` bytes from `in` to contiguous `out` along a
// one-input plan (transpose, slice, expand, broadcast).
void StridedCopy(const IterPlan& p, size_t elem_size, const void* in, void* out);

// ---- Vectorized float math (simd.h holds the vector type and exp) --------
// Compiled once per instruction set and picked at start-up
// (vector_math.cc, vector_math_impl.h), with the casts and the interleave
// below, which are instruction-set specific too.

// Each array function reads x[0..n) and writes y[0..n) (y may equal x). The
// tail goes through the same formulas with partial loads, so a value's
// result never depends on its position. Accuracy (tested): a few ulp.

void VExp(const float* x, float* y, int64_t n);

void VTanh(const float* x, float* y, int64_t n);
void VSigmoid(const float* x, float* y, int64_t n);
void VErf(const float* x, float* y, int64_t n);
void VGelu(const float* x, float* y, int64_t n);               // exact (erf) form
void VGeluTanh(const float* x, float* y, int64_t n);           // tanh approximation
void VSwish(const float* x, float* y, int64_t n, float beta);  // x * sigmoid(beta x)

// Row reductions with independent partial sums in vector lanes (more
// accurate and faster than a serial float sum).
float RowSum(const float* x, int64_t n);
float RowMax(const float* x, int64_t n);
// Returns sum (x - mean)^2 and stores sum (x - mean) in *sum_diff, which
// corrects the rounding error of a float mean (corrected two-pass variance).
float RowSumSqDiff(const float* x, int64_t n, float mean, float* sum_diff);
// y = exp(x - shift), returns the sum of y.
float RowExpSum(const float* x, float* y, int64_t n, float shift);
// dx = dy * gelu'(x), gelu's exact form or (approximate) its tanh form.
void VGeluGrad(const float* x, const float* dy, float* dx, int64_t n, bool approximate);

// float32 <-> bfloat16 with core/half.h's bits (round to nearest even, NaN
// kept quiet, subnormals rounded), so weights converted at compile time and
// activations cast by kernels agree.
void FloatsToBF16(const float* x, uint16_t* y, int64_t n);
void BF16ToFloats(const uint16_t* x, float* y, int64_t n);
// y[3 j + i] = r_i[j] for j < n (three rows of 4-byte elements interleaved:
// NCHW -> NHWC of an RGB image). VectorInterleave3(): whether it runs on
// vectors here (AVX-512); where not, a tiled transpose is the faster way.
bool VectorInterleave3();
void Interleave3(const uint32_t* r0, const uint32_t* r1, const uint32_t* r2, uint32_t* y,
                 int64_t n);

}  // namespace tiller::cpu
