// The feeds of a model or training program, checked the same way for every
// API (Predictor tensors, TrainingSession::SetFeed, gradient queries):
// declared name, dtype and dims (-1 for a dynamic dim), and the values set
// for the next run. Messages say "input ... the model's" or "feed ... the
// program's", as the API's own words go.
#pragma once

#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace tiller::runtime {

struct FeedDecl {
  std::string name;
  DType dtype = DType::kF32;
  Shape dims;  // -1 marks a dynamic dim; empty: rank unknown (anything goes)
};

class FeedSet {
 public:
  struct Words {
    const char* noun;   // "input", "feed"
    const char* owner;  // "model", "program"
  };
  FeedSet(std::vector<FeedDecl> decls, Words words);

  size_t size() const { return feeds_.size(); }
  const FeedDecl& decl(size_t i) const { return feeds_[i].decl; }
  // The position of `name`; kNotFound listing the names otherwise.
  size_t Index(const std::string& name) const;

  // Sets the shape of the next value: rank and static dims must match the
  // declaration. Drops a value set for another shape.
  void SetShape(size_t i, const Shape& shape);
  // Copies a value. Without SetShape the declared dims are used (they must
  // be static). dtype and byte count must match.
  void SetData(size_t i, DType dtype, const void* data, size_t bytes);
  // Shape and value together (the training session's SetFeed).
  void Set(size_t i, DType dtype, const Shape& shape, const void* data);

  bool has_shape(size_t i) const { return feeds_[i].has_shape; }
  // The current shape, or the declared dims before any.
  const Shape& shape(size_t i) const;
  const AlignedBuffer& data(size_t i) const { return feeds_[i].data; }
  // Every value's shape; kInvalidArgument naming the first feed not set.
  std::vector<Shape> Shapes() const;

 private:
  struct Feed {
    FeedDecl decl;
    Shape shape;
    bool has_shape = false, has_data = false;
    AlignedBuffer data;
  };
  std::vector<Feed> feeds_;
  Words words_;
};

}  // namespace tiller::runtime
