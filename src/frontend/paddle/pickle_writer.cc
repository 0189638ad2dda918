// The pickle writer (see pickle.h): protocol 4, laid out as Python's
// pickler lays out a dict of numpy arrays (numpy's __reduce__ through
// _reconstruct + BUILD state, dtypes memoized and referenced with BINGET,
// SETITEMS batches of 1000, 64 KiB frames with large payloads written
// outside frames), so the files read like ones paddle.static.save writes.
#include <fmt/format.h>

#include <functional>
#include <limits>
#include <map>
#include <set>

#include "core/atomic_file.h"
#include "core/error.h"
#include "frontend/paddle/pickle.h"
#include "frontend/paddle/pickle_util.h"

namespace tiller::paddle {
namespace {

using Sink = std::function<void(const void*, size_t)>;

// Python's framer: frames are committed once they reach 64 KiB; payloads
// of at least that size bypass frames; frames under 4 bytes get no header.
constexpr size_t kFrameTarget = size_t{64} * 1024;
constexpr size_t kFrameMin = 4;
constexpr size_t kBatch = 1000;  // pickle's _BATCHSIZE for SETITEMS

class Emitter {
 public:
  explicit Emitter(Sink sink) : sink_(std::move(sink)) {}

  void Op(uint8_t op) { frame_.push_back(static_cast<char>(op)); }
  template <typename T>
  void Le(T v) {
    frame_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  uint32_t Memoize() {
    Op(0x94);
    return memo_count_++;
  }
  uint32_t memo_count() const { return memo_count_; }
  void Get(uint32_t index) {
    if (index < 256) {
      Op('h');
      Le<uint8_t>(static_cast<uint8_t>(index));
    } else {
      Op('j');
      Le<uint32_t>(index);
    }
  }
  // Python's save_long for protocol >= 2.
  void Int(int64_t v) {
    if (v >= 0 && v < 256) {
      Op('K');
      Le<uint8_t>(static_cast<uint8_t>(v));
    } else if (v >= 0 && v < 65536) {
      Op('M');
      Le<uint16_t>(static_cast<uint16_t>(v));
    } else if (v >= std::numeric_limits<int32_t>::min() &&
               v <= std::numeric_limits<int32_t>::max()) {
      Op('J');
      Le<int32_t>(static_cast<int32_t>(v));
    } else {
      // LONG1 with the fewest two's-complement bytes that keep the sign.
      uint8_t n = 8;
      while (n > 1) {
        int64_t shifted = v >> (8 * (n - 1) - 1);
        if (shifted != 0 && shifted != -1) break;
        --n;
      }
      Op(0x8a);
      Le<uint8_t>(n);
      for (uint8_t i = 0; i < n; ++i) Le<uint8_t>(static_cast<uint8_t>(v >> (8 * i)));
    }
  }
  void Unicode(std::string_view s) {
    std::string header;
    if (s.size() < 256) {
      header = {'\x8c', static_cast<char>(s.size())};
    } else if (s.size() <= std::numeric_limits<uint32_t>::max()) {
      header = "X";
      AppendLe<uint32_t>(header, static_cast<uint32_t>(s.size()));
    } else {
      header = "\x8d";
      AppendLe<uint64_t>(header, s.size());
    }
    Payload(header, s.data(), s.size());
  }
  void Bytes(const void* data, size_t size) {
    std::string header;
    if (size < 256) {
      header = {'C', static_cast<char>(size)};
    } else if (size <= std::numeric_limits<uint32_t>::max()) {
      header = "B";
      AppendLe<uint32_t>(header, static_cast<uint32_t>(size));
    } else {
      header = "\x8e";
      AppendLe<uint64_t>(header, size);
    }
    Payload(header, data, size);
  }
  // Called between objects, as Python's save() does.
  void MaybeCommitFrame() {
    if (frame_.size() >= kFrameTarget) CommitFrame();
  }
  void Finish() {
    Op('.');
    CommitFrame();
  }
  void WriteUnframed(const void* data, size_t size) { sink_(data, size); }

 private:
  template <typename T>
  static void AppendLe(std::string& s, T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void Payload(const std::string& header, const void* data, size_t size) {
    if (size >= kFrameTarget) {
      CommitFrame();
      sink_(header.data(), header.size());
      sink_(data, size);
      return;
    }
    frame_ += header;
    frame_.append(static_cast<const char*>(data), size);
  }
  void CommitFrame() {
    if (frame_.empty()) return;
    if (frame_.size() >= kFrameMin) {
      std::string header = "\x95";
      AppendLe<uint64_t>(header, frame_.size());
      sink_(header.data(), header.size());
    }
    sink_(frame_.data(), frame_.size());
    frame_.clear();
  }

  Sink sink_;
  std::string frame_;
  uint32_t memo_count_ = 0;
};

void Check(const ArrayView& a, std::set<std::string_view>& names) {
  if (!ValidUtf8(a.name)) Fail(ErrorKind::kInvalidArgument, "array name is not valid UTF-8");
  if (!names.insert(a.name).second) {
    Fail(ErrorKind::kInvalidArgument, "array '{}' is given twice", a.name);
  }
  size_t itemsize = NumpyItemSize(a.dtype);
  if (itemsize == 0) {
    Fail(ErrorKind::kInvalidArgument,
         "array '{}': dtype '{}' cannot be written (float16/32/64, int8/16/32/64, uint8, "
         "uint16, bool can)",
         a.name, a.dtype);
  }
  uint64_t numel = 1;
  bool empty = false;
  for (int64_t d : a.shape) {
    if (d < 0) Fail(ErrorKind::kInvalidArgument, "array '{}': negative dimension {}", a.name, d);
    if (d == 0) empty = true;
  }
  for (int64_t d : a.shape) {
    if (empty) break;
    if (numel > std::numeric_limits<uint64_t>::max() / 16 / static_cast<uint64_t>(d)) {
      Fail(ErrorKind::kInvalidArgument, "array '{}': shape is too large", a.name);
    }
    numel *= static_cast<uint64_t>(d);
  }
  if (empty) numel = 0;
  if (numel * itemsize != a.data.size()) {
    Fail(ErrorKind::kInvalidArgument, "array '{}': {} {} needs {} bytes, {} given", a.name, a.dtype,
         ShapeToString(Shape(a.shape.begin(), a.shape.end())), numel * itemsize, a.data.size());
  }
}

class DictWriter {
 public:
  explicit DictWriter(Sink sink) : e_(std::move(sink)) {}

  void Write(std::span<const ArrayView> arrays) {
    std::set<std::string_view> names;
    for (const ArrayView& a : arrays) Check(a, names);
    // PROTO precedes framing.
    const char proto[] = {'\x80', '\x04'};
    e_.WriteUnframed(proto, sizeof(proto));
    e_.Op('}');
    e_.Memoize();
    // CPython's batch_dict_exact: one item is a SETITEM; otherwise MARK ...
    // SETITEMS batches of 1000, repeated while a batch came out full (so a
    // multiple of 1000 ends with an empty batch).
    if (arrays.size() == 1) {
      Str(arrays[0].name);
      Array(arrays[0]);
      e_.Op('s');
    } else if (!arrays.empty()) {
      size_t next = 0, in_batch;
      do {
        e_.Op('(');
        for (in_batch = 0; in_batch < kBatch && next < arrays.size(); ++in_batch, ++next) {
          Str(arrays[next].name);
          Array(arrays[next]);
        }
        e_.Op('u');
      } while (in_batch == kBatch);
    }
    e_.Finish();
  }

 private:
  // Python's pickler starts every save() of an object, memoized or not, by
  // committing the frame when it has reached the target size; each helper
  // below that stands for one save() begins with Save(), so frames end
  // where Python's do.
  void Save() { e_.MaybeCommitFrame(); }
  void Str(std::string_view s) {
    Save();
    e_.Unicode(s);
    e_.Memoize();
  }
  void Int(int64_t v) {
    Save();
    e_.Int(v);
  }
  void Op(uint8_t op) {  // None, True, False
    Save();
    e_.Op(op);
  }

  // STACK_GLOBAL of module.name, memoized once and then referenced. Python
  // interns module and global names, so a repeated one ("numpy" of
  // numpy.ndarray and numpy.dtype) is a BINGET of the first.
  void GlobalRef(int64_t& memo, const char* module, const char* name) {
    Save();
    if (memo >= 0) return e_.Get(static_cast<uint32_t>(memo));
    for (const char* s : {module, name}) {
      auto it = names_.find(s);
      if (it != names_.end()) {
        Save();
        e_.Get(it->second);
      } else {
        Str(s);
        names_[s] = e_.memo_count() - 1;
      }
    }
    e_.Op(0x93);
    memo = e_.Memoize();
  }

  // numpy.dtype('f4', False, True) + BUILD (3, '<', None, None, None, -1, -1, 0).
  void DType(std::string_view numpy_name) {
    Save();
    auto it = dtypes_.find(std::string(numpy_name));
    if (it != dtypes_.end()) return e_.Get(it->second);
    GlobalRef(dtype_global_, "numpy", "dtype");
    Save();  // the argument tuple
    Str(NumpyTypeByName(numpy_name)->code);
    Op(0x89);  // align=False
    Op(0x88);  // copy=True
    e_.Op(0x87);
    e_.Memoize();
    e_.Op('R');
    dtypes_[std::string(numpy_name)] = e_.Memoize();
    Save();  // the state tuple
    e_.Op('(');
    Int(3);
    char order = NumpyItemSize(numpy_name) == 1 ? '|' : '<';
    auto o = orders_.find(order);
    if (o != orders_.end()) {
      Save();
      e_.Get(o->second);
    } else {
      Str(std::string_view(&order, 1));
      orders_[order] = e_.memo_count() - 1;
    }
    Op('N');
    Op('N');
    Op('N');
    Int(-1);
    Int(-1);
    Int(0);
    e_.Op('t');
    e_.Memoize();
    e_.Op('b');
  }

  // CPython keeps one object per bytes value of length 0 or 1, and the
  // pickler memoizes by object, so such values (the typecode b'b', the data
  // of one-byte arrays) are written once and then referenced.
  void Bytes(std::span<const std::byte> value) {
    Save();
    if (value.size() > 1) {
      e_.Bytes(value.data(), value.size());
      e_.Memoize();
      return;
    }
    std::string key(reinterpret_cast<const char*>(value.data()), value.size());
    auto it = small_bytes_.find(key);
    if (it != small_bytes_.end()) return e_.Get(it->second);
    e_.Bytes(value.data(), value.size());
    small_bytes_[key] = e_.Memoize();
  }

  // numpy's ndarray.__reduce__: _reconstruct(ndarray, (0,), b'b') then
  // BUILD (1, shape, dtype, False, data).
  void Array(const ArrayView& a) {
    Save();
    // numpy.core.multiarray, not numpy 2's numpy._core: numpy 2 keeps the
    // old name importable for pickles, numpy 1.x knows only the old one.
    GlobalRef(reconstruct_, "numpy.core.multiarray", "_reconstruct");
    Save();  // the argument tuple
    GlobalRef(ndarray_, "numpy", "ndarray");
    Save();  // (0,)
    Int(0);
    e_.Op(0x85);
    e_.Memoize();
    static constexpr std::byte kTypecode[] = {std::byte{'b'}};
    Bytes(kTypecode);
    e_.Op(0x87);
    e_.Memoize();
    e_.Op('R');
    e_.Memoize();
    Save();  // the state tuple
    e_.Op('(');
    Int(1);
    Save();  // the shape
    if (a.shape.empty()) {
      e_.Op(')');  // Python does not memoize the empty tuple
    } else {
      if (a.shape.size() > 3) e_.Op('(');
      for (int64_t d : a.shape) Int(d);
      e_.Op(a.shape.size() > 3 ? uint8_t{'t'} : static_cast<uint8_t>(0x84 + a.shape.size()));
      e_.Memoize();
    }
    DType(a.dtype);
    Op(0x89);  // C order
    Bytes(a.data);
    e_.Op('t');
    e_.Memoize();
    e_.Op('b');
  }

  Emitter e_;
  int64_t reconstruct_ = -1, ndarray_ = -1, dtype_global_ = -1;
  std::map<std::string, uint32_t> dtypes_;
  std::map<char, uint32_t> orders_;
  std::map<std::string, uint32_t> names_;
  std::map<std::string, uint32_t> small_bytes_;
};

}  // namespace

std::string SerializeArrayPickle(std::span<const ArrayView> arrays) {
  std::string out;
  DictWriter([&](const void* p, size_t n) {
    out.append(static_cast<const char*>(p), n);
  }).Write(arrays);
  return out;
}

void WriteArrayPickle(AtomicFile& file, std::span<const ArrayView> arrays) {
  try {
    DictWriter([&](const void* p, size_t n) { file.Write(p, n); }).Write(arrays);
  } catch (const Error& e) {
    // Invalid arrays are reported with the file they were meant for.
    if (e.kind() == ErrorKind::kInvalidArgument) {
      Fail(ErrorKind::kInvalidArgument, "cannot write checkpoint '{}': {}", file.path(), e.what());
    }
    throw;
  }
}

void WriteArrayPickle(const std::string& path, std::span<const ArrayView> arrays) {
  AtomicFile file(path, "checkpoint");
  WriteArrayPickle(file, arrays);
  file.Commit();
}

void WriteArrayPickle(const std::string& path, const std::vector<PickledArray>& arrays) {
  std::vector<ArrayView> views;
  views.reserve(arrays.size());
  for (const PickledArray& a : arrays) {
    std::span<const std::byte> bytes;
    if (a.data) bytes = {a.data->data(), a.data->size()};
    views.push_back({a.name, a.dtype, a.shape, bytes});
  }
  WriteArrayPickle(path, views);
}

}  // namespace tiller::paddle
