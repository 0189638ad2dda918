#include "frontend/paddle/pickle_util.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "frontend/paddle/pickle.h"

namespace tiller::paddle {
namespace {

// Every opcode of pickle protocols 0-5 (Lib/pickle.py), so refusals can
// name what they refuse.
constexpr std::pair<uint8_t, const char*> kOpcodes[] = {
    {'(', "MARK"},
    {'.', "STOP"},
    {'0', "POP"},
    {'1', "POP_MARK"},
    {'2', "DUP"},
    {'F', "FLOAT"},
    {'I', "INT"},
    {'J', "BININT"},
    {'K', "BININT1"},
    {'L', "LONG"},
    {'M', "BININT2"},
    {'N', "NONE"},
    {'P', "PERSID"},
    {'Q', "BINPERSID"},
    {'R', "REDUCE"},
    {'S', "STRING"},
    {'T', "BINSTRING"},
    {'U', "SHORT_BINSTRING"},
    {'V', "UNICODE"},
    {'X', "BINUNICODE"},
    {'a', "APPEND"},
    {'b', "BUILD"},
    {'c', "GLOBAL"},
    {'d', "DICT"},
    {'}', "EMPTY_DICT"},
    {'e', "APPENDS"},
    {'g', "GET"},
    {'h', "BINGET"},
    {'i', "INST"},
    {'j', "LONG_BINGET"},
    {'l', "LIST"},
    {']', "EMPTY_LIST"},
    {'o', "OBJ"},
    {'p', "PUT"},
    {'q', "BINPUT"},
    {'r', "LONG_BINPUT"},
    {'s', "SETITEM"},
    {'t', "TUPLE"},
    {')', "EMPTY_TUPLE"},
    {'u', "SETITEMS"},
    {'G', "BINFLOAT"},
    {'B', "BINBYTES"},
    {'C', "SHORT_BINBYTES"},
    {0x80, "PROTO"},
    {0x81, "NEWOBJ"},
    {0x82, "EXT1"},
    {0x83, "EXT2"},
    {0x84, "EXT4"},
    {0x85, "TUPLE1"},
    {0x86, "TUPLE2"},
    {0x87, "TUPLE3"},
    {0x88, "NEWTRUE"},
    {0x89, "NEWFALSE"},
    {0x8a, "LONG1"},
    {0x8b, "LONG4"},
    {0x8c, "SHORT_BINUNICODE"},
    {0x8d, "BINUNICODE8"},
    {0x8e, "BINBYTES8"},
    {0x8f, "EMPTY_SET"},
    {0x90, "ADDITEMS"},
    {0x91, "FROZENSET"},
    {0x92, "NEWOBJ_EX"},
    {0x93, "STACK_GLOBAL"},
    {0x94, "MEMOIZE"},
    {0x95, "FRAME"},
    {0x96, "BYTEARRAY8"},
    {0x97, "NEXT_BUFFER"},
    {0x98, "READONLY_BUFFER"},
};

constexpr NumpyType kNumpyTypes[] = {
    {"f4", "float32", 4}, {"f8", "float64", 8}, {"f2", "float16", 2}, {"i1", "int8", 1},
    {"u1", "uint8", 1},   {"i2", "int16", 2},   {"u2", "uint16", 2},  {"i4", "int32", 4},
    {"i8", "int64", 8},   {"b1", "bool", 1},
};

}  // namespace

const NumpyType* NumpyTypeByCode(std::string_view code) {
  for (const NumpyType& t : kNumpyTypes) {
    if (code == t.code) return &t;
  }
  return nullptr;
}

const NumpyType* NumpyTypeByName(std::string_view name) {
  for (const NumpyType& t : kNumpyTypes) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

size_t NumpyItemSize(std::string_view numpy_name) {
  const NumpyType* t = NumpyTypeByName(numpy_name);
  return t ? t->size : 0;
}

bool DTypeFromNumpyName(std::string_view numpy_name, DType* out) {
  // "uint16" carries Paddle's bfloat16 bits but is not one itself.
  if (!NumpyTypeByName(numpy_name) || numpy_name == "uint16") return false;
  return ParseDType(numpy_name, out);
}

const char* NumpyNameOf(DType t) {
  return t == DType::kBF16 ? "uint16" : DTypeName(t);
}

const char* OpcodeName(uint8_t op) {
  for (const auto& [code, name] : kOpcodes) {
    if (code == op) return name;
  }
  return "?";
}

bool IsPickleOpcode(uint8_t op) {
  return OpcodeName(op)[0] != '?';
}

bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    uint8_t c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) {
      n = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      n = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      n = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (s.size() - i < n) return false;
    for (size_t k = 1; k < n; ++k) {
      uint8_t t = static_cast<uint8_t>(s[i + k]);
      if ((t & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (t & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF) return false;
    i += n;
  }
  return true;
}

bool Latin1FromUtf8(std::string_view utf8, std::string* out) {
  out->clear();
  out->reserve(utf8.size());
  for (size_t i = 0; i < utf8.size(); ++i) {
    uint8_t c = static_cast<uint8_t>(utf8[i]);
    if (c < 0x80) {
      out->push_back(static_cast<char>(c));
      continue;
    }
    // U+0080..U+00FF are C2 80..C3 BF.
    if ((c != 0xC2 && c != 0xC3) || i + 1 >= utf8.size()) return false;
    uint8_t t = static_cast<uint8_t>(utf8[++i]);
    if ((t & 0xC0) != 0x80) return false;
    out->push_back(static_cast<char>(((c & 0x1F) << 6) | (t & 0x3F)));
  }
  return true;
}

void TransposeFortranToC(const Shape& shape, size_t itemsize, const void* src, void* dst) {
  const size_t rank = shape.size();
  uint64_t numel = 1;
  for (int64_t d : shape) numel *= static_cast<uint64_t>(d);
  if (numel == 0) return;
  // Fortran strides in elements: the first index moves fastest.
  std::vector<uint64_t> fstride(rank, 1);
  for (size_t k = 1; k < rank; ++k)
    fstride[k] = fstride[k - 1] * static_cast<uint64_t>(shape[k - 1]);
  std::vector<int64_t> idx(rank, 0);
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  uint64_t off = 0;  // Fortran offset of idx
  for (uint64_t n = 0; n < numel; ++n) {
    std::memcpy(d + n * itemsize, s + off * itemsize, itemsize);
    // Odometer over the C order: the last index moves fastest.
    for (size_t k = rank; k-- > 0;) {
      if (++idx[k] < shape[k]) {
        off += fstride[k];
        break;
      }
      off -= fstride[k] * static_cast<uint64_t>(shape[k] - 1);
      idx[k] = 0;
    }
  }
}

void ByteSwapInPlace(void* data, uint64_t count, size_t itemsize) {
  char* p = static_cast<char*>(data);
  for (uint64_t i = 0; i < count; ++i, p += itemsize) std::reverse(p, p + itemsize);
}

}  // namespace tiller::paddle
