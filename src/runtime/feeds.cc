#include "runtime/feeds.h"

#include <cstring>

#include "core/error.h"

namespace tiller::runtime {

FeedSet::FeedSet(std::vector<FeedDecl> decls, Words words) : words_(words) {
  for (FeedDecl& d : decls) {
    Feed f;
    f.decl = std::move(d);
    feeds_.push_back(std::move(f));
  }
}

size_t FeedSet::Index(const std::string& name) const {
  for (size_t i = 0; i < feeds_.size(); ++i) {
    if (feeds_[i].decl.name == name) return i;
  }
  std::string names;
  for (const Feed& f : feeds_) names += (names.empty() ? "" : ", ") + f.decl.name;
  Fail(ErrorKind::kNotFound, "{} has no {} named '{}' ({}s: {})", words_.owner, words_.noun, name,
       words_.noun, names);
}

void FeedSet::SetShape(size_t i, const Shape& shape) {
  Feed& f = feeds_[i];
  const Shape& d = f.decl.dims;
  bool ok = d.empty() || d.size() == shape.size();
  for (size_t k = 0; ok && k < d.size(); ++k) ok = d[k] < 0 || d[k] == shape[k];
  for (int64_t s : shape) ok = ok && s >= 0;
  if (!ok)
    Fail(ErrorKind::kInvalidArgument, "{} '{}': shape {} does not match the {}'s {}", words_.noun,
         f.decl.name, ShapeToString(shape), words_.owner, ShapeToString(d));
  f.shape = shape;
  f.has_shape = true;
  f.has_data = false;
}

void FeedSet::SetData(size_t i, DType dtype, const void* data, size_t bytes) {
  Feed& f = feeds_[i];
  if (!f.has_shape) {
    bool static_shape = !f.decl.dims.empty();
    for (int64_t s : f.decl.dims) static_shape = static_shape && s >= 0;
    if (!static_shape)
      Fail(ErrorKind::kInvalidArgument, "{} '{}' has dynamic shape {}: call Reshape() first",
           words_.noun, f.decl.name, ShapeToString(f.decl.dims));
    f.shape = f.decl.dims;
    f.has_shape = true;
  }
  if (dtype != f.decl.dtype)
    Fail(ErrorKind::kInvalidArgument, "{} '{}' expects {}, got {}", words_.noun, f.decl.name,
         DTypeName(f.decl.dtype), DTypeName(dtype));
  size_t need = static_cast<size_t>(NumElements(f.shape)) * DTypeSize(f.decl.dtype);
  if (bytes != need)
    Fail(ErrorKind::kInvalidArgument, "{} '{}' of shape {} needs {} bytes, got {}", words_.noun,
         f.decl.name, ShapeToString(f.shape), need, bytes);
  if (f.data.size() != need) f.data.Resize(need);
  if (need) std::memcpy(f.data.data(), data, need);
  f.has_data = true;
}

void FeedSet::Set(size_t i, DType dtype, const Shape& shape, const void* data) {
  Feed& f = feeds_[i];
  if (dtype != f.decl.dtype)
    Fail(ErrorKind::kInvalidArgument, "{} '{}' expects {}, got {}", words_.noun, f.decl.name,
         DTypeName(f.decl.dtype), DTypeName(dtype));
  // A declared rank must match exactly, unknown rank (no dims) too.
  if (f.decl.dims.size() != shape.size())
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

}  // namespace tiller::runtime
