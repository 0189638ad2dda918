// _tiller.read_paddle_program_ops(path): a Paddle program's ops as Tiller's
// readers normalize them (legacy op types and slot names, PIR programs
// mapped through the op table), with whether a translator exists for each.
// Lets tests and tools inspect programs Tiller cannot compile whole, such as
// training programs with Paddle's backward ops.
#include <pybind11/stl.h>

#include "bindings.h"
#include "tiller/inspect.h"

namespace py = pybind11;

namespace tiller::python {
namespace {

py::dict Slots(const ProgramOp::Slots& slots) {
  py::dict d;
  for (const auto& [name, args] : slots) d[py::str(name)] = args;
  return d;
}

py::list ReadOps(const std::string& path) {
  py::list ops;
  for (const ProgramOp& op : ReadProgramOps(path)) {
    py::dict d;
    d["type"] = op.type;
    d["inputs"] = Slots(op.inputs);
    d["outputs"] = Slots(op.outputs);
    d["translatable"] = op.translatable;
    ops.append(std::move(d));
  }
  return ops;
}

void BindPaddleProgram(py::module_& m) {
  m.def("read_paddle_program_ops", &ReadOps, py::arg("path"),
        "The ops of a Paddle program (.json PIR or legacy ProgramDesc) as Tiller reads them: "
        "dicts with type, inputs and outputs (slot -> variable names), translatable.");
}

TILLER_PY_BINDINGS(BindPaddleProgram);

}  // namespace
}  // namespace tiller::python
