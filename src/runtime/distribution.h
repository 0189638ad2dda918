// The MPI job this process belongs to: libtiller_mpi.so (src/distributed/),
// loaded and initialized the first time a session asks for distribution.
#pragma once

#include "backend/collective.h"

namespace tiller::runtime {

// The job's process group. Fails (kUnimplemented) naming what is missing
// when this Tiller was built without MPI or the library cannot be loaded.
// TILLER_MPI_LIBRARY overrides where the library is looked for (default:
// next to libtiller.so).
backend::ProcessGroup& MpiProcessGroup();

}  // namespace tiller::runtime
