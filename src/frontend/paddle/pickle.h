// Python pickles of a dict {str: numpy.ndarray}: the format of Paddle's
// checkpoints (paddle.static.save's .pdparams / .pdopt, also read by
// paddle.load), read and written without Python.
//
// The reader is a small, strict pickle machine for exactly what Python's
// pickle writes for such a dict with numpy 1.x or 2.x, protocols 2 to 5 (5
// with in-band buffers only): arrays through numpy's _reconstruct + BUILD
// state, or (protocol 5) _frombuffer; dtypes through numpy.dtype + BUILD;
// numpy scalars (multiarray.scalar) as 0-d arrays.
// Any other opcode or global is refused with tiller::Error naming the
// source, the byte offset and the opcode or global (kUnimplemented for a
// well-formed pickle outside the subset, kDataLoss for corrupt or truncated
// input). Every length is checked against the bytes left before anything
// is allocated. Fortran-ordered and big-endian arrays are converted to C
// order, little-endian.
//
// The writer emits protocol 4 the way Python's pickler does (frames, memo),
// naming numpy.core.multiarray._reconstruct, which numpy 1.x and 2.x both
// load without warnings; files go through AtomicFile (temporary file, fsync,
// rename), so an interrupted save never leaves a truncated checkpoint.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace tiller {
class AtomicFile;
}

namespace tiller::paddle {

// One array of the dict, in insertion order.
struct PickledArray {
  std::string name;
  // numpy dtype name: "float32", "float64", "float16", "int8", "uint8",
  // "int16", "uint16" (Paddle's bfloat16 bits), "int32", "int64", "bool".
  std::string dtype;
  Shape shape;                          // {} for a 0-d array
  std::shared_ptr<AlignedBuffer> data;  // C order, little-endian, numel * itemsize bytes
};

// What the writer reads: borrowed name, dtype, shape and bytes (C order,
// little-endian), so callers holding other containers need not copy.
struct ArrayView {
  std::string_view name;
  std::string_view dtype;  // numpy name, as in PickledArray
  std::span<const int64_t> shape;
  std::span<const std::byte> data;
};

// Element size of a numpy dtype name the pickle code handles; 0 otherwise.
size_t NumpyItemSize(std::string_view numpy_name);
// The IR DType of a numpy name where one exists ("uint16" has none).
bool DTypeFromNumpyName(std::string_view numpy_name, DType* out);
// The numpy name Paddle writes a tensor of this DType as (bfloat16 as
// "uint16", its raw bits).
const char* NumpyNameOf(DType t);

// Parses a pickle held in memory; `source` (a path) names it in messages.
std::vector<PickledArray> ParseArrayPickle(std::string_view bytes, const std::string& source);
// Reads a .pdparams / .pdopt file (kNotFound when it cannot be opened).
std::vector<PickledArray> ReadArrayPickle(const std::string& path);

// Protocol 4 bytes of the dict {name: array} in the given order. Fails
// (kInvalidArgument, naming the array) on an unsupported dtype, a byte count
// that disagrees with the shape, a negative dim, a duplicate or non-UTF-8
// name.
std::string SerializeArrayPickle(std::span<const ArrayView> arrays);
// The same, written atomically to `path`; write errors name the path and
// the errno text.
void WriteArrayPickle(const std::string& path, std::span<const ArrayView> arrays);
void WriteArrayPickle(const std::string& path, const std::vector<PickledArray>& arrays);
// The same bytes into `file`, not yet committed: a checkpoint writes its
// files before it renames any of them (runtime/training_checkpoint.cc).
void WriteArrayPickle(AtomicFile& file, std::span<const ArrayView> arrays);

}  // namespace tiller::paddle
