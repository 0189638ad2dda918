#include "runtime/feeds.h"

#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/half.h"

namespace tiller::runtime {

FeedSet::FeedSet(std::vector<FeedDecl> decls, Words words) : words_(words) {
  for (FeedDecl& d : decls) {
    Feed f;
    f.decl = std::move(d);
    feeds_.push_back(std::move(f));
  }
}

size_t FeedSet::Index(const std::string& name, const char* context) const {
  for (size_t i = 0; i < feeds_.size(); ++i) {
    if (feeds_[i].decl.name == name) return i;
  }
  std::string names;
  for (const Feed& f : feeds_) names += (names.empty() ? "" : ", ") + f.decl.name;
  Fail(ErrorKind::kNotFound, "{}{}{} has no {} named '{}' ({}s: {})", context ? context : "",
       context ? ": " : "", words_.owner, words_.noun, name, words_.noun, names);
}

void FeedSet::SetMicroBatching(MicroBatching m) {
  if (m.count < 1 || m.rows < 0)
    Fail(ErrorKind::kInvalidArgument, "micro-batching of {} micro-batches of {} rows", m.count,
         m.rows);
  micro_ = std::move(m);
  // Values set before were checked against other numbers.
  for (Feed& f : feeds_) f.has_shape = f.has_data = false;
}

Shape FeedSet::MicroShape(const Feed& f, const Shape& shape) const {
  const MicroBatching& m = *micro_;
  const std::string& name = f.decl.name;
  // No declared dims: the rank is unknown (anything goes but the count).
  const bool rank_known = !f.decl.dims.empty();
  Shape micro = f.decl.dims;
  const bool rows_given = rank_known && micro[0] < 0 && m.rows > 0;
  if (rows_given) micro[0] = m.rows;
  bool known = rank_known;
  for (int64_t d : micro) known = known && d >= 0;
  const std::string loop = m.count == 1 || m.loop.empty()
                               ? std::string("1 micro-batch")
                               : fmt::format("{} = {} micro-batches", m.loop, m.count);
  const std::string rows_note =
      rows_given ? fmt::format(" (its first dim is {} {})", m.rows_word, m.rows) : std::string();
  // Unknown rank, one micro-batch: the value is it, whatever its shape.
  if (!rank_known && m.count == 1) return shape;
  if (known) {
    const int64_t need = m.count * NumElements(micro);
    if (NumElements(shape) == need) return micro;
    Fail(ErrorKind::kInvalidArgument,
         "{} '{}': shape {} holds {} elements; one run takes {} of {}{}, {} elements in all",
         words_.noun, name, ShapeToString(shape), NumElements(shape), loop, ShapeToString(micro),
         rows_note, need);
  }
  // Some dim is only known from the value: it is [count x rows, dims...].
  bool ok = !shape.empty() && (!rank_known || shape.size() == micro.size());
  for (size_t k = 1; ok && rank_known && k < micro.size(); ++k)
    ok = micro[k] < 0 || micro[k] == shape[k];
  if (ok)
    ok = rank_known && micro[0] >= 0 ? shape[0] == m.count * micro[0] : shape[0] % m.count == 0;
  if (!ok) {
    const std::string first =
        rank_known && micro[0] >= 0
            ? fmt::format("{} rows ({} each{})", m.count * micro[0], micro[0], rows_note)
            : fmt::format("a multiple of {} rows", m.count);
    Fail(ErrorKind::kInvalidArgument,
         "{} '{}': shape {} does not hold the micro-batches of the {}'s {}: one run takes {} "
         "along the first dimension, {}",
         words_.noun, name, ShapeToString(shape), words_.owner, ShapeToString(f.decl.dims), loop,
         first);
  }
  Shape out = shape;
  out[0] /= m.count;
  return out;
}

void FeedSet::SetShape(size_t i, const Shape& shape) {
  Feed& f = feeds_[i];
  const Shape& d = f.decl.dims;
  bool ok = true;
  for (int64_t s : shape) ok = ok && s >= 0;
  if (ok && !micro_) {
    ok = d.empty() || d.size() == shape.size();
    for (size_t k = 0; ok && k < d.size(); ++k) ok = d[k] < 0 || d[k] == shape[k];
  }
  if (!ok)
    Fail(ErrorKind::kInvalidArgument, "{} '{}': shape {} does not match the {}'s {}", words_.noun,
         f.decl.name, ShapeToString(shape), words_.owner, ShapeToString(d));
  if (micro_) f.micro = MicroShape(f, shape);
  f.shape = shape;
  f.has_shape = true;
  f.has_data = false;
}

namespace {

// Copies n integers of type From into To's, or names the first that To
// cannot hold.
template <typename From, typename To>
void CopyIntegers(const void* src, void* dst, size_t n, const char* noun, const std::string& name,
                  DType from, DType to) {
  const From* in = static_cast<const From*>(src);
  To* out = static_cast<To*>(dst);
  for (size_t e = 0; e < n; ++e) {
    const int64_t v = in[e];
    if (v < int64_t{std::numeric_limits<To>::min()} || v > int64_t{std::numeric_limits<To>::max()})
      Fail(ErrorKind::kInvalidArgument,
           "{} '{}' expects {}; its {} value holds {} at element {}, which {} cannot hold", noun,
           name, DTypeName(to), DTypeName(from), v, e, DTypeName(to));
    out[e] = static_cast<To>(v);
  }
}

}  // namespace

void FeedSet::CheckDType(const Feed& f, DType dtype) const {
  const bool integers = (dtype == DType::kI32 || dtype == DType::kI64) &&
                        (f.decl.dtype == DType::kI32 || f.decl.dtype == DType::kI64);
  // float16 widens to float32 exactly (Paddle's IPU tests fed float16 data
  // to the float32 inputs of programs their float16 mode cast).
  const bool widen = dtype == DType::kF16 && f.decl.dtype == DType::kF32;
  if (dtype != f.decl.dtype && !(micro_ && (integers || widen)))
    Fail(ErrorKind::kInvalidArgument, "{} '{}' expects {}, got {}", words_.noun, f.decl.name,
         DTypeName(f.decl.dtype), DTypeName(dtype));
}

void FeedSet::CopyConverted(Feed& f, DType dtype, const void* data, size_t elements) {
  CheckDType(f, dtype);
  const size_t bytes = elements * DTypeSize(f.decl.dtype);
  if (f.data.size() != bytes) f.data.Resize(bytes);
  if (!bytes) return;
  if (dtype == f.decl.dtype) {
    std::memcpy(f.data.data(), data, bytes);
  } else if (dtype == DType::kF16) {
    const uint16_t* in = static_cast<const uint16_t*>(data);
    float* out = f.data.as<float>();
    for (size_t e = 0; e < elements; ++e) out[e] = HalfToFloat(in[e]);
  } else if (dtype == DType::kI32) {
    CopyIntegers<int32_t, int64_t>(data, f.data.data(), elements, words_.noun, f.decl.name, dtype,
                                   f.decl.dtype);
  } else {
    CopyIntegers<int64_t, int32_t>(data, f.data.data(), elements, words_.noun, f.decl.name, dtype,
                                   f.decl.dtype);
  }
}

void FeedSet::SetData(size_t i, DType dtype, const void* data, size_t bytes) {
  Feed& f = feeds_[i];
  if (!f.has_shape) {
    bool static_shape = !f.decl.dims.empty();
    for (int64_t s : f.decl.dims) static_shape = static_shape && s >= 0;
    if (!static_shape)
      Fail(ErrorKind::kInvalidArgument, "{} '{}' has dynamic shape {}: call Reshape() first",
           words_.noun, f.decl.name, ShapeToString(f.decl.dims));
    SetShape(i, f.decl.dims);
  }
  const size_t elements = static_cast<size_t>(NumElements(f.shape));
  CheckDType(f, dtype);
  const size_t need = elements * DTypeSize(dtype);
  if (bytes != need)
    Fail(ErrorKind::kInvalidArgument, "{} '{}' of shape {} needs {} bytes, got {}", words_.noun,
         f.decl.name, ShapeToString(f.shape), need, bytes);
  f.has_data = false;  // until the whole value is in (a conversion may fail)
  CopyConverted(f, dtype, data, elements);
  f.has_data = true;
}

void FeedSet::Set(size_t i, DType dtype, const Shape& shape, const void* data) {
  Feed& f = feeds_[i];
  CheckDType(f, dtype);
  // A declared rank must match exactly, unknown rank (no dims) too; with
  // micro-batching the element count decides (SetShape).
  if (!micro_ && f.decl.dims.size() != shape.size())
    Fail(ErrorKind::kInvalidArgument, "{} '{}': shape {} does not match the {}'s {}", words_.noun,
         f.decl.name, ShapeToString(shape), words_.owner, ShapeToString(f.decl.dims));
  SetShape(i, shape);
  SetData(i, dtype, data, static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype));
}

const Shape& FeedSet::shape(size_t i) const {
  return feeds_[i].has_shape ? feeds_[i].shape : feeds_[i].decl.dims;
}

std::vector<Shape> FeedSet::Shapes() const {
  std::vector<Shape> out;
  for (const Feed& f : feeds_) {
    if (!f.has_data)
      Fail(ErrorKind::kInvalidArgument, "{} '{}' was not set before Run()", words_.noun,
           f.decl.name);
    out.push_back(f.shape);
  }
  return out;
}

std::vector<Shape> FeedSet::MicroBatchShapes() const {
  std::vector<Shape> out = Shapes();
  if (!micro_) return out;
  for (size_t i = 0; i < feeds_.size(); ++i) out[i] = feeds_[i].micro;
  return out;
}

}  // namespace tiller::runtime
