// Constant folding while a graph is built (ir::Graph::set_folder): an op
// whose inputs are all constants is run once on a host-accessible device
// and its outputs become constants. Frontends fold shape arithmetic this way
// (shape, slice of shapes, fill_constant, range...).
#pragma once

#include "backend/backend.h"
#include "ir/graph.h"

namespace tiller::compile {

// A folder running kernels on `device` (host-accessible; it must outlive
// the graph's building). Ops without a kernel there are left unfolded.
ir::Graph::Folder MakeFolder(backend::Device& device);

}  // namespace tiller::compile
