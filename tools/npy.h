// Reading and writing numpy .npy files (format version 1.0/2.0, C order,
// little-endian), for the `tiller run` command.
#pragma once

#include <string>
#include <vector>

#include "tiller/data_type.h"
#include "tiller/error.h"

namespace tiller::tools {

// Throws tiller::Error naming the file on a missing, malformed or
// unsupported (Fortran order, big-endian, object) file.
HostTensor ReadNpy(const std::string& path);
void WriteNpy(const std::string& path, DataType dtype, const std::vector<int64_t>& shape,
              const void* data);

}  // namespace tiller::tools
