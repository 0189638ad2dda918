#include "tools/npy.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "core/error.h"

namespace tiller::tools {
namespace {

const char* Descr(DType t) {
  switch (t) {
    case DType::kF32: return "<f4";
    case DType::kF64: return "<f8";
    case DType::kF16: return "<f2";
    case DType::kI8: return "|i1";
    case DType::kU8: return "|u1";
    case DType::kI16: return "<i2";
    case DType::kI32: return "<i4";
    case DType::kI64: return "<i8";
    case DType::kBool: return "|b1";
    case DType::kBF16: return "<u2";
  }
  return "?";
}

// Value of `'key': value` in the header dict, up to the next top-level comma.
std::string Field(const std::string& header, const std::string& key, const std::string& path) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) Fail(ErrorKind::kDataLoss, "{}: npy header lacks '{}'", path, key);
  size_t colon = header.find(':', k);
  size_t start = header.find_first_not_of(' ', colon + 1);
  size_t end = header[start] == '(' ? header.find(')', start) + 1 : header.find(',', start);
  return header.substr(start, end - start);
}

}  // namespace

NpyArray ReadNpy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) Fail(ErrorKind::kNotFound, "{}: cannot open", path);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    Fail(ErrorKind::kDataLoss, "{}: not a .npy file", path);
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    offset = 10;
  } else {
    if (bytes.size() < 12) Fail(ErrorKind::kDataLoss, "{}: truncated header", path);
    uint32_t len;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    offset = 12;
  }
  if (offset + header_len > bytes.size()) Fail(ErrorKind::kDataLoss, "{}: truncated header", path);
  std::string header = bytes.substr(offset, header_len);
  std::string descr = Field(header, "descr", path);
  std::string fortran = Field(header, "fortran_order", path);
  std::string shape_str = Field(header, "shape", path);
  if (fortran.find("True") != std::string::npos)
    Fail(ErrorKind::kInvalidArgument, "{}: Fortran-order arrays are not supported", path);
  NpyArray a;
  bool found = false;
  for (DType t : {DType::kF32, DType::kF64, DType::kF16, DType::kI8, DType::kU8, DType::kI16,
                  DType::kI32, DType::kI64, DType::kBool}) {
    if (descr.find(Descr(t)) != std::string::npos) {
      a.dtype = t;
      found = true;
    }
  }
  if (!found) Fail(ErrorKind::kInvalidArgument, "{}: unsupported dtype {}", path, descr);
  for (size_t i = 0; i < shape_str.size();) {
    size_t j = shape_str.find_first_of("0123456789", i);
    if (j == std::string::npos) break;
    size_t e = shape_str.find_first_not_of("0123456789", j);
    a.shape.push_back(std::stoll(shape_str.substr(j, e - j)));
    i = e;
  }
  size_t need = static_cast<size_t>(NumElements(a.shape)) * DTypeSize(a.dtype);
  size_t data_at = offset + header_len;
  if (bytes.size() - data_at != need)
    Fail(ErrorKind::kDataLoss, "{}: {} data bytes, shape {} needs {}", path, bytes.size() - data_at,
         ShapeToString(a.shape), need);
  a.data.Resize(need);
  if (need) std::memcpy(a.data.data(), bytes.data() + data_at, need);
  return a;
}

void WriteNpy(const std::string& path, DType dtype, const Shape& shape, const void* data) {
  // Python tuple syntax: "()", "(3,)", "(2, 3)".
  std::string shape_str = "(";
  for (size_t i = 0; i < shape.size(); ++i) shape_str += (i ? ", " : "") + std::to_string(shape[i]);
  shape_str += shape.size() == 1 ? ",)" : ")";
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                   Descr(dtype), shape_str);
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) Fail(ErrorKind::kNotFound, "{}: cannot write", path);
  f.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&len), 2);
  f << header;
  f.write(static_cast<const char*>(data),
          static_cast<std::streamsize>(NumElements(shape) * static_cast<int64_t>(DTypeSize(dtype))));
  if (!f) Fail(ErrorKind::kDataLoss, "{}: write failed", path);
}

}  // namespace tiller::tools
