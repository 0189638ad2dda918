// Paddle checkpoints without Python: the files paddle.static.save writes
// (<prefix>.pdparams for parameters, <prefix>.pdopt for optimizer state),
// each a Python pickle of a dict {variable name: numpy.ndarray}, and which
// variables of a training program go into which file.
//
//   auto arrays = tiller::checkpoint::ReadPaddlePickle("ckpt/step100.pdparams");
//   for (const auto& var : tiller::checkpoint::PaddleStateRoles("train.json"))
//     if (var.file == tiller::checkpoint::SaveFile::kPdopt) ...;
//   tiller::checkpoint::WritePaddlePickle("ckpt/step200.pdopt", opt_arrays);
//
// Reading accepts what Python's pickle writes for such a dict with numpy
// 1.x or 2.x, protocols 2 to 5 (in-band buffers), Fortran-ordered and
// big-endian arrays included (returned in C order, little-endian); anything
// else is refused with tiller::Error naming the file, the byte offset and
// the opcode or Python global. Writing produces protocol 4 that pickle.load,
// paddle.static.load and paddle.load read back, atomically: the file is
// written to a temporary name in the same directory, fsynced and renamed, so
// an interrupted save leaves the previous file (or none), never a truncated
// one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tiller/error.h"

namespace tiller::checkpoint {

// One variable of a checkpoint file.
struct HostArray {
  std::string name;
  // numpy dtype name: "float32", "float64", "float16", "int8", "uint8",
  // "int16", "uint16" (Paddle writes bfloat16 tensors as their uint16 bits),
  // "int32", "int64" or "bool".
  std::string dtype;
  std::vector<int64_t> shape;  // empty for a 0-d array
  std::vector<uint8_t> data;   // C order, little-endian: numel * ItemSize(dtype) bytes
};

// Bytes per element of a dtype name above; 0 for any other name.
size_t ItemSize(const std::string& dtype);

// The arrays of a .pdparams / .pdopt file, in the file's dict order.
// Throws tiller::Error: kNotFound (cannot open), kDataLoss (truncated or
// corrupt), kUnimplemented (a valid pickle of something other than a dict
// of arrays of the dtypes above).
std::vector<HostArray> ReadPaddlePickle(const std::string& path);

// Writes the arrays as one dict, in the given order, atomically replacing
// `path`; the directory must exist. Throws kInvalidArgument (unsupported
// dtype, data size that disagrees with the shape, repeated name) and, for
// I/O failures, an error naming the path and the system's reason.
void WritePaddlePickle(const std::string& path, const std::vector<HostArray>& arrays);

// What a persistable variable of a training program holds.
enum class StateRole {
  kParameter,       // trained: the Param of an optimizer op
  kStatistic,       // a parameter no optimizer updates (batch-norm running mean/variance)
  kOptimizerState,  // another persistable input of an optimizer op (moments, beta powers...)
  kLearningRate,    // the LearningRate input of optimizer ops
  kOther,           // any other persistable variable
};

// Where paddle.static.save (Paddle 3.3) puts a variable.
enum class SaveFile { kPdparams, kPdopt, kNone };

struct StateVariable {
  std::string name;
  StateRole role = StateRole::kOther;
  SaveFile file = SaveFile::kNone;
};

// "parameter", "statistic", "optimizer_state", "learning_rate", "other".
const char* StateRoleName(StateRole role);
// ".pdparams", ".pdopt", or "" for kNone.
const char* SaveFileSuffix(SaveFile file);

// Every persistable variable of a training program (PIR .json or legacy
// .pdmodel, as paddle.static.save or serialization writes it), sorted by
// name, with its role and the file paddle.static.save puts it in. The file
// follows Paddle's rule for the program's form, not the role: a legacy
// program puts variables marked is_parameter in .pdparams and other
// persistables in .pdopt (so batch-norm statistics are in .pdparams, the
// learning rate in .pdopt); a PIR program puts builtin.parameter results in
// .pdparams (the learning rate too) and persistable pd_op.data in .pdopt.
std::vector<StateVariable> PaddleStateRoles(const std::string& program_path);

}  // namespace tiller::checkpoint
