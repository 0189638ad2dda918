// Reading and writing numpy .npy files (format version 1.0/2.0, C order,
// little-endian), for the `tiller run` command.
#pragma once

#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace tiller::tools {

struct NpyArray {
  DType dtype = DType::kF32;
  Shape shape;
  AlignedBuffer data;
};

// Throws tiller::Error naming the file on a missing, malformed or
// unsupported (Fortran order, big-endian, object) file.
NpyArray ReadNpy(const std::string& path);
void WriteNpy(const std::string& path, DType dtype, const Shape& shape, const void* data);

}  // namespace tiller::tools
