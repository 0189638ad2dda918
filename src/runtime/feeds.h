// The feeds of a model or training program, checked the same way for every
// API (Predictor tensors, TrainingSession::SetFeed, gradient queries):
// declared name, dtype and dims (-1 for a dynamic dim), and the values set
// for the next run. Messages say "input ... the model's" or "feed ... the
// program's", as the API's own words go.
//
// With the IPU execution model (SetMicroBatching: the training session,
// and the predictor with EnableIpu) a value holds a run's micro-batches one
// after another, as Paddle's IPU executor handed it to PopART.
#pragma once

#include <optional>
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
  // The position of `name`; kNotFound listing the names otherwise, after
  // "`context`: " where one is given (the setting that named it).
  size_t Index(const std::string& name, const char* context = nullptr) const;

  // The IPU execution model: every value holds `count` micro-batches (a
  // run's batches per step x accumulation x replicas), micro-batch k being
  // the k-th count-th of its bytes (PopART's [count, micro-batch...] order).
  // A declared dynamic first dim is `rows` in a micro-batch (Paddle's
  // micro_batch_size, which its IPU compiler put there); 0 leaves it to the
  // value. When that makes every dim of a micro-batch known, a value of any
  // shape holding count x its elements is taken, as PopART took it (it
  // checked the element count only); otherwise the value is [count x rows,
  // the declared dims...]. int32 and int64 values are converted to the
  // declared one of the two, as PopART did; a value that does not fit fails
  // naming the feed. float16 values of a float32 feed widen (exactly). `loop` spells count's
  // factors for messages
  // ("batches_per_step 2 x accumulation_factor 3"), `rows_word` the option
  // that gave rows ("micro_batch_size").
  struct MicroBatching {
    int count = 1;
    int64_t rows = 0;
    std::string loop;
    std::string rows_word = "micro_batch_size";
  };
  void SetMicroBatching(MicroBatching m);
  bool micro_batching() const { return micro_.has_value(); }

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
  // With SetMicroBatching: the shape of one micro-batch of every value;
  // without, Shapes().
  std::vector<Shape> MicroBatchShapes() const;

 private:
  struct Feed {
    FeedDecl decl;
    Shape shape;
    Shape micro;  // with micro-batching: one micro-batch's shape
    bool has_shape = false, has_data = false;
    AlignedBuffer data;
  };
  // With micro-batching: the shape of one micro-batch of a value of shape
  // `shape` for feed f; fails naming the numbers when it holds no whole
  // number of them.
  Shape MicroShape(const Feed& f, const Shape& shape) const;
  // Fails unless a value of `dtype` is taken for f (its own dtype; with
  // micro-batching int32 <-> int64 and float16 -> float32 too).
  void CheckDType(const Feed& f, DType dtype) const;
  // Copies `elements` values of `dtype` into f.data as f.decl.dtype
  // (micro-batching: int32 <-> int64, checked); fails on another mismatch.
  void CopyConverted(Feed& f, DType dtype, const void* data, size_t elements);
  std::vector<Feed> feeds_;
  Words words_;
  std::optional<MicroBatching> micro_;
};

}  // namespace tiller::runtime
