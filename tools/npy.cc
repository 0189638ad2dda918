#include "npy.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>

namespace tiller::tools {
namespace {

template <typename... Args>
[[noreturn]] void Fail(ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(kind, fmt::format(format, std::forward<Args>(args)...));
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Value of `'key': value` in the header dict, up to the next top-level comma.
std::string Field(const std::string& header, const std::string& key, const std::string& path) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) Fail(ErrorKind::kDataLoss, "{}: npy header lacks '{}'", path, key);
  const size_t colon = header.find(':', k);
  const size_t start =
      colon == std::string::npos ? colon : header.find_first_not_of(' ', colon + 1);
  // (Found by the npy fuzz target: a key without a value read past the header.)
  if (start == std::string::npos)
    Fail(ErrorKind::kDataLoss, "{}: npy header has no value for '{}'", path, key);
  size_t end = header[start] == '(' ? header.find(')', start) : header.find(',', start);
  if (end != std::string::npos && header[start] == '(') ++end;
  return header.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

}  // namespace

HostTensor ReadNpy(const std::string& path) {
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
  HostTensor a;
  // The descr field keeps its quotes: '<f4'. uint16 (numpy's spelling of
  // bfloat16 bits) is refused: nothing says the file holds bfloat16.
  std::string d = descr.size() >= 2 ? descr.substr(1, descr.size() - 2) : descr;
  if (!ParseNumpyDescr(d, &a.dtype) || a.dtype == DataType::BFLOAT16)
    Fail(ErrorKind::kInvalidArgument, "{}: unsupported dtype {}", path, descr);
  const size_t data_at = offset + header_len;
  const size_t have = bytes.size() - data_at;
  // The element count, checked against the bytes there are as it grows (a
  // dim of 10^30, or dims whose product overflows, was found by the npy
  // fuzz target: std::stoll threw past the CLI's error handling).
  uint64_t count = 1;
  for (size_t i = 0; i < shape_str.size();) {
    size_t j = shape_str.find_first_of("0123456789", i);
    if (j == std::string::npos) break;
    size_t e = shape_str.find_first_not_of("0123456789", j);
    if (e == std::string::npos) e = shape_str.size();
    int64_t dim = 0;
    auto [end, ec] = std::from_chars(shape_str.data() + j, shape_str.data() + e, dim);
    if (ec != std::errc())
      Fail(ErrorKind::kDataLoss, "{}: shape {} has a dimension too large", path, shape_str);
    a.shape.push_back(dim);
    if (dim != 0 && count > have / static_cast<uint64_t>(dim))
      count = have + 1;
    else
      count *= static_cast<uint64_t>(dim);
    i = e;
  }
  if (count > have / SizeOf(a.dtype) + 1)
    Fail(ErrorKind::kDataLoss, "{}: {} data bytes, shape {} needs more", path, have,
         ShapeString(a.shape));
  size_t need = static_cast<size_t>(count) * SizeOf(a.dtype);
  if (bytes.size() - data_at != need)
    Fail(ErrorKind::kDataLoss, "{}: {} data bytes, shape {} needs {}", path, bytes.size() - data_at,
         ShapeString(a.shape), need);
  a.data.resize(need);
  if (need) std::memcpy(a.data.data(), bytes.data() + data_at, need);
  return a;
}

void WriteNpy(const std::string& path, DataType dtype, const std::vector<int64_t>& shape,
              const void* data) {
  // Python tuple syntax: "()", "(3,)", "(2, 3)".
  std::string shape_str = "(";
  for (size_t i = 0; i < shape.size(); ++i) shape_str += (i ? ", " : "") + std::to_string(shape[i]);
  shape_str += shape.size() == 1 ? ",)" : ")";
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                   NumpyDescr(dtype), shape_str);
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) Fail(ErrorKind::kNotFound, "{}: cannot write", path);
  f.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&len), 2);
  f << header;
  int64_t n = 1;
  for (int64_t dim : shape) n *= dim;
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n * SizeOf(dtype)));
  if (!f) Fail(ErrorKind::kDataLoss, "{}: write failed", path);
}

}  // namespace tiller::tools
