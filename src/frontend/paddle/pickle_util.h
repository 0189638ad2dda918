// Helpers shared by the pickle reader (pickle.cc) and writer
// (pickle_writer.cc). Not a public interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/shape.h"

namespace tiller::paddle {

// "BINUNICODE" for an opcode byte, "?" for a byte that is no pickle opcode.
const char* OpcodeName(uint8_t op);
bool IsPickleOpcode(uint8_t op);

// A numpy dtype the pickle code handles: numpy's dtype code without the
// byte order ("f4", "u2", "b1": what numpy.dtype's __reduce__ passes), its
// name ("float32") and element size. nullptr for any other.
struct NumpyType {
  const char* code;
  const char* name;
  size_t size;
};
const NumpyType* NumpyTypeByCode(std::string_view code);
const NumpyType* NumpyTypeByName(std::string_view name);

// Well-formed UTF-8 as Python's pickle decodes it ('surrogatepass': encoded
// surrogates are accepted; overlong forms and code points above U+10FFFF
// are not).
bool ValidUtf8(std::string_view s);
// Protocol 2 stores bytes as text whose code points are the byte values;
// false when a code point is above U+00FF or the UTF-8 is malformed.
bool Latin1FromUtf8(std::string_view utf8, std::string* out);

// Reorders a Fortran-ordered array (first index fastest) into C order.
void TransposeFortranToC(const Shape& shape, size_t itemsize, const void* src, void* dst);
// Reverses the bytes of each of `count` elements of `itemsize` bytes.
void ByteSwapInPlace(void* data, uint64_t count, size_t itemsize);

}  // namespace tiller::paddle
