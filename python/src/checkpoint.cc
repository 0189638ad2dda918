// Bindings of include/tiller/checkpoint.h: Paddle's .pdparams / .pdopt
// pickles read and written by Tiller's C++ code, and the state roles of a
// training program:
//   _tiller.read_paddle_pickle(path) -> dict[str, numpy.ndarray] (file order)
//   _tiller.write_paddle_pickle(path, {name: array}) (atomic, protocol 4)
//   _tiller.paddle_state_roles(program_path) -> {name: (role, ".pdparams" | ".pdopt" | None)}
#include "tiller/checkpoint.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <vector>

#include "bindings.h"

namespace py = pybind11;
namespace ckpt = tiller::checkpoint;

namespace {

// The checkpoint dtype name of a numpy dtype; fails naming the array.
std::string DTypeName(const py::dtype& dt, const std::string& name) {
  char kind = dt.kind();
  size_t size = static_cast<size_t>(dt.itemsize());
  std::string out;
  if (kind == 'f') out = "float" + std::to_string(size * 8);
  if (kind == 'i') out = "int" + std::to_string(size * 8);
  if (kind == 'u') out = "uint" + std::to_string(size * 8);
  if (kind == 'b') out = "bool";
  if (out.empty() || ckpt::ItemSize(out) != size) {
    throw tiller::Error(tiller::ErrorKind::kInvalidArgument,
                        "array '" + name + "': numpy dtype " + py::repr(dt).cast<std::string>() +
                            " cannot be written to a Paddle checkpoint");
  }
  return out;
}

py::dict ReadPickle(const std::string& path) {
  std::vector<ckpt::HostArray> arrays;
  {
    py::gil_scoped_release release;
    arrays = ckpt::ReadPaddlePickle(path);
  }
  py::dict out;
  for (ckpt::HostArray& a : arrays) {
    py::array arr(py::dtype(a.dtype), a.shape);
    if (!a.data.empty()) std::memcpy(arr.mutable_data(), a.data.data(), a.data.size());
    std::vector<uint8_t>().swap(a.data);
    out[py::str(a.name)] = std::move(arr);
  }
  return out;
}

void WritePickle(const std::string& path, const py::dict& arrays) {
  std::vector<ckpt::HostArray> host;
  host.reserve(arrays.size());
  for (const auto& [key, value] : arrays) {
    ckpt::HostArray h;
    h.name = py::cast<std::string>(key);
    py::array arr = py::array::ensure(value, py::array::c_style);
    if (!arr) throw py::type_error("value of '" + h.name + "' is not array-like");
    if (arr.dtype().byteorder() == '>') {
      // Checkpoints hold little-endian data, as numpy on x86 writes them.
      arr = py::array::ensure(arr.attr("astype")(arr.dtype().attr("newbyteorder")("<")),
                              py::array::c_style);
    }
    h.dtype = DTypeName(arr.dtype(), h.name);
    h.shape.assign(arr.shape(), arr.shape() + arr.ndim());
    h.data.resize(static_cast<size_t>(arr.nbytes()));
    if (!h.data.empty()) std::memcpy(h.data.data(), arr.data(), h.data.size());
    host.push_back(std::move(h));
  }
  py::gil_scoped_release release;
  ckpt::WritePaddlePickle(path, host);
}

py::dict StateRoles(const std::string& program_path) {
  std::vector<ckpt::StateVariable> vars;
  {
    py::gil_scoped_release release;
    vars = ckpt::PaddleStateRoles(program_path);
  }
  py::dict out;
  for (const ckpt::StateVariable& v : vars) {
    py::object file = py::none();
    if (v.file != ckpt::SaveFile::kNone) file = py::str(ckpt::SaveFileSuffix(v.file));
    out[py::str(v.name)] = py::make_tuple(ckpt::StateRoleName(v.role), file);
  }
  return out;
}

void BindCheckpoint(py::module_& m) {
  m.def("read_paddle_pickle", &ReadPickle, py::arg("path"),
        "Arrays of a .pdparams / .pdopt pickle, read by Tiller's C++ reader, in file order.");
  m.def("write_paddle_pickle", &WritePickle, py::arg("path"), py::arg("arrays"),
        "Writes {name: array} as paddle.static.save does (pickle protocol 4), atomically.");
  m.def("paddle_state_roles", &StateRoles, py::arg("program_path"),
        "{name: (role, file)} for every persistable variable of a training program; role is "
        "parameter/statistic/optimizer_state/learning_rate/other, file the suffix "
        "paddle.static.save writes it to (None: neither).");
}

TILLER_PY_BINDINGS(BindCheckpoint);

}  // namespace
