// Test helpers: Paddle's ProgramDesc written byte by byte with a tiny
// protobuf wire encoder (the tests do not link libprotobuf, and encoding by
// hand checks framework.proto's field numbers independently).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tiller::paddle_wire {

class Pb {
 public:
  Pb& Int(int field, int64_t v) {  // int32/int64/enum/bool (negatives: 10 bytes)
    Key(field, 0);
    Varint(static_cast<uint64_t>(v));
    return *this;
  }
  Pb& Float(int field, float f) {
    Key(field, 5);
    Raw(&f, 4);
    return *this;
  }
  Pb& Double(int field, double d) {
    Key(field, 1);
    Raw(&d, 8);
    return *this;
  }
  Pb& Bytes(int field, const std::string& s) {
    Key(field, 2);
    Varint(s.size());
    s_ += s;
    return *this;
  }
  Pb& Msg(int field, const Pb& m) { return Bytes(field, m.s_); }
  const std::string& str() const { return s_; }

 private:
  void Key(int field, int wire) { Varint(static_cast<uint64_t>(field) << 3 | wire); }
  void Varint(uint64_t v) {
    do {
      uint8_t b = v & 0x7f;
      v >>= 7;
      s_.push_back(static_cast<char>(b | (v ? 0x80 : 0)));
    } while (v);
  }
  void Raw(const void* p, size_t n) { s_.append(static_cast<const char*>(p), n); }
  std::string s_;
};

// VarType.Type codes and AttrType codes from framework.proto.
enum : int { kBool = 0, kI32 = 2, kI64 = 3, kF16 = 4, kF32 = 5, kDense = 7, kFeed = 9, kFetch = 10 };
enum : int {
  aInt = 0,
  aFloat = 1,
  aString = 2,
  aInts = 3,
  aFloats = 4,
  aStrings = 5,
  aBoolean = 6,
  aBooleans = 7,
  aBlock = 8,
  aLong = 9,
  aLongs = 11,
  aFloat64s = 12,
  aFloat64 = 15,
  aScalar = 16,
  aScalars = 17
};

inline Pb TensorDesc(int dtype, const std::vector<int64_t>& dims) {
  Pb t;
  t.Int(1, dtype);
  for (int64_t d : dims) t.Int(2, d);
  return t;
}

// VarDesc of a dense tensor: VarType{type=DENSE_TENSOR, dense_tensor{tensor}}.
inline Pb Var(const std::string& name, int dtype, const std::vector<int64_t>& dims,
              bool persistable = false) {
  Pb type;
  type.Int(1, kDense).Msg(3, Pb().Msg(1, TensorDesc(dtype, dims)));
  return Pb().Bytes(1, name).Msg(2, type).Int(3, persistable);
}

// The `feed` / `fetch` list variables every exported program declares.
inline Pb ListVar(const std::string& name, int type) {
  return Pb().Bytes(1, name).Msg(2, Pb().Int(1, type)).Int(3, true);
}

inline Pb Slot(const std::string& slot, const std::vector<std::string>& args) {
  Pb s;
  s.Bytes(1, slot);
  for (const auto& a : args) s.Bytes(2, a);
  return s;
}

// Appends a little-endian scalar (tensor records).
template <typename T>
void Put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// Writes `bytes` to dir/name (creating folders); returns the path.
inline std::string WriteFile(const std::filesystem::path& dir, const std::string& name,
                             const std::string& bytes) {
  std::filesystem::path p = dir / name;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
  return p.string();
}

}  // namespace tiller::paddle_wire
