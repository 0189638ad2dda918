// The pickle reader (see pickle.h): a stack machine for the opcodes Python
// writes for a dict of numpy arrays, protocols 2-5. The opcodes and their
// order were read off pickletools.dis of pickles written by numpy 2.4 and by
// paddle.static.save; the comments on each reduction show what Python emits.
#include "frontend/paddle/pickle.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include "core/error.h"
#include "frontend/paddle/pickle_util.h"

namespace tiller::paddle {
namespace {

static_assert(std::endian::native == std::endian::little, "the pickle code assumes little-endian");

// Limits against hostile input: every object costs at least one opcode byte,
// so these only bound memory per input byte. A dict batch (SETITEMS) holds
// 2000 entries; a protocol-4 pickle memoizes about 8 objects per array.
constexpr size_t kMaxStack = size_t{1} << 16;
constexpr size_t kMaxMemo = size_t{1} << 22;
// Tuples nest 2 deep in these pickles (the BUILD state holds the shape); a
// chain of TUPLE1 opcodes could nest millions deep and overflow the stack
// when destroyed.
constexpr int kMaxDepth = 32;

enum class Global : uint8_t {
  kReconstruct,
  kScalar,
  kNdarray,
  kDType,
  kFromBuffer,
  kCodecsEncode,
  kBytes
};

struct Obj;
using ObjPtr = std::shared_ptr<Obj>;

struct BytesObj {
  std::string_view view;  // into the input, or into `owned`
  std::string owned;      // latin-1 decoded (protocol 2)
};
struct DTypeObj {
  std::string name;  // numpy name
  size_t itemsize = 0;
  char byteorder = '=';
  bool built = false;
};
struct ArrayObj {
  PickledArray array;  // name unset
  bool built = false;
};
struct DictObj {
  std::vector<PickledArray> entries;
  std::unordered_map<std::string, size_t> index;
};
struct NoneObj {};

struct Obj {
  std::variant<NoneObj, bool, int64_t, std::string, BytesObj, std::vector<ObjPtr>, Global, DTypeObj,
               ArrayObj, DictObj>
      v;
  int depth = 0;  // tuple nesting
};

const char* KindName(const Obj& o) {
  static constexpr std::array<const char*, 10> kNames = {
      "None",  "bool",   "int",         "str",           "bytes",
      "tuple", "global", "numpy.dtype", "numpy.ndarray", "dict"};
  return kNames[o.v.index()];
}

class Parser {
 public:
  Parser(std::string_view in, const std::string& source) : in_(in), source_(source) {}
  std::vector<PickledArray> Run();

 private:
  std::string Where() const {
    return fmt::format("{}: pickle byte {}: {}", source_, op_pos_, OpcodeName(op_));
  }
  [[noreturn]] void Corrupt(const std::string& what) const {
    Fail(ErrorKind::kDataLoss, "{}: corrupt: {}", Where(), what);
  }
  [[noreturn]] void Unsupported(const std::string& what) const {
    Fail(ErrorKind::kUnimplemented, "{}: {} (Tiller reads pickles of a dict of numpy arrays only)",
         Where(), what);
  }
  size_t Left() const { return in_.size() - pos_; }
  std::string_view Take(uint64_t n, const char* what) {
    if (n > Left()) {
      Fail(ErrorKind::kDataLoss, "{}: truncated: {} needs {} bytes, {} left", Where(), what, n,
           Left());
    }
    std::string_view s = in_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }
  template <typename T>
  T Read(const char* what) {
    T v;
    std::memcpy(&v, Take(sizeof(T), what).data(), sizeof(T));
    return v;
  }
  void Push(ObjPtr o) {
    if (stack_.size() >= kMaxStack) Corrupt(fmt::format("stack deeper than {}", kMaxStack));
    stack_.push_back(std::move(o));
  }
  ObjPtr Pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) Corrupt("stack underflow");
    ObjPtr o = std::move(stack_.back());
    stack_.pop_back();
    return o;
  }
  const ObjPtr& Top() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) Corrupt("stack underflow");
    return stack_.back();
  }
  std::vector<ObjPtr> PopMark() {
    if (marks_.empty()) Corrupt("no MARK to pop to");
    size_t at = marks_.back();
    marks_.pop_back();
    std::vector<ObjPtr> items(std::make_move_iterator(stack_.begin() + static_cast<ptrdiff_t>(at)),
                              std::make_move_iterator(stack_.end()));
    stack_.resize(at);
    return items;
  }
  void Memo(uint64_t index) {
    if (index > memo_.size()) {
      // Python's picklers number memo entries consecutively.
      Corrupt(fmt::format("memo index {} out of sequence ({} entries)", index, memo_.size()));
    }
    if (index == memo_.size()) {
      if (memo_.size() >= kMaxMemo) Corrupt(fmt::format("more than {} memo entries", kMaxMemo));
      memo_.push_back(Top());
    } else {
      memo_[index] = Top();
    }
  }
  void Recall(uint64_t index) {
    if (index >= memo_.size()) {
      Corrupt(fmt::format("memo index {} not defined ({} entries)", index, memo_.size()));
    }
    Push(memo_[index]);
  }
  template <typename T>
  T& As(const ObjPtr& o, const char* what) {
    T* p = std::get_if<T>(&o->v);
    if (!p) Corrupt(fmt::format("{} is a {}", what, KindName(*o)));
    return *p;
  }
  std::string Str(std::string_view utf8) {
    if (!ValidUtf8(utf8)) Corrupt("string is not valid UTF-8");
    return std::string(utf8);
  }
  ObjPtr Tuple(std::vector<ObjPtr> items) {
    int depth = 0;
    for (const ObjPtr& o : items) depth = std::max(depth, o->depth);
    if (depth >= kMaxDepth) Corrupt(fmt::format("tuples nested deeper than {}", kMaxDepth));
    auto t = std::make_shared<Obj>(Obj{std::move(items)});
    t->depth = depth + 1;
    return t;
  }
  ObjPtr BytesOf(std::string_view view) { return std::make_shared<Obj>(Obj{BytesObj{view, {}}}); }
  ObjPtr Resolve(const std::string& module, const std::string& name);
  void Step(uint8_t op);
  ObjPtr Reduce(Global callable, std::vector<ObjPtr>& args);
  void Build(const ObjPtr& obj, const ObjPtr& state);
  void SetItems(DictObj& dict, std::vector<ObjPtr>& items);
  Shape ShapeOf(const ObjPtr& tuple, const char* what);
  std::shared_ptr<AlignedBuffer> Materialize(const Shape& shape, const DTypeObj& dtype,
                                             bool fortran, std::string_view bytes);

  std::string_view in_;
  const std::string& source_;
  size_t pos_ = 0;
  size_t op_pos_ = 0;
  uint8_t op_ = 0;
  bool stopped_ = false;
  std::vector<ObjPtr> stack_;
  std::vector<size_t> marks_;
  std::vector<ObjPtr> memo_;
  std::unordered_set<const AlignedBuffer*> seen_buffers_;
  uint64_t repeated_bytes_ = 0;
};

ObjPtr Parser::Resolve(const std::string& module, const std::string& name) {
  // numpy 2 moved numpy.core to numpy._core; pickles name either. Protocol 2
  // spells builtins as __builtin__ (Python 2 compatibility).
  Global g;
  if ((module == "numpy._core.multiarray" || module == "numpy.core.multiarray") &&
      name == "_reconstruct") {
    g = Global::kReconstruct;
  } else if ((module == "numpy._core.multiarray" || module == "numpy.core.multiarray") &&
             name == "scalar") {
    g = Global::kScalar;
  } else if (module == "numpy" && name == "ndarray") {
    g = Global::kNdarray;
  } else if (module == "numpy" && name == "dtype") {
    g = Global::kDType;
  } else if ((module == "numpy._core.numeric" || module == "numpy.core.numeric") &&
             name == "_frombuffer") {
    g = Global::kFromBuffer;
  } else if (module == "_codecs" && name == "encode") {
    g = Global::kCodecsEncode;
  } else if ((module == "__builtin__" || module == "builtins") && name == "bytes") {
    g = Global::kBytes;
  } else {
    Unsupported(fmt::format("global '{}.{}' is not allowed", module, name));
  }
  return std::make_shared<Obj>(Obj{g});
}

Shape Parser::ShapeOf(const ObjPtr& tuple, const char* what) {
  Shape shape;
  for (const ObjPtr& d : As<std::vector<ObjPtr>>(tuple, what)) {
    int64_t v = As<int64_t>(d, "a dimension");
    if (v < 0) Corrupt(fmt::format("negative dimension {} in {}", v, what));
    shape.push_back(v);
  }
  return shape;
}

// The array's bytes in C order, little-endian; `bytes` is in the pickle's
// order (Fortran when `fortran`) and byte order.
std::shared_ptr<AlignedBuffer> Parser::Materialize(const Shape& shape, const DTypeObj& dtype,
                                                   bool fortran, std::string_view bytes) {
  uint64_t numel = 1;
  bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
  for (int64_t d : shape) {
    if (empty) break;
    if (numel > std::numeric_limits<uint64_t>::max() / 16 / static_cast<uint64_t>(d)) {
      Corrupt(fmt::format("shape {} is too large", ShapeToString(shape)));
    }
    numel *= static_cast<uint64_t>(d);
  }
  if (empty) numel = 0;
  uint64_t need = numel * dtype.itemsize;
  if (need != bytes.size()) {
    Corrupt(fmt::format("a {} {} array needs {} bytes, the pickle holds {}", dtype.name,
                        ShapeToString(shape), need, bytes.size()));
  }
  auto buf = std::make_shared<AlignedBuffer>(static_cast<size_t>(need));
  if (need == 0) return buf;
  if (fortran && shape.size() > 1) {
    TransposeFortranToC(shape, dtype.itemsize, bytes.data(), buf->data());
  } else {
    std::memcpy(buf->data(), bytes.data(), bytes.size());
  }
  if (dtype.byteorder == '>') ByteSwapInPlace(buf->data(), numel, dtype.itemsize);
  return buf;
}

ObjPtr Parser::Reduce(Global callable, std::vector<ObjPtr>& args) {
  auto arity = [&](size_t n, const char* what) {
    if (args.size() != n)
      Corrupt(fmt::format("{} takes {} arguments, got {}", what, n, args.size()));
  };
  switch (callable) {
    case Global::kReconstruct: {
      // _reconstruct(numpy.ndarray, (0,), b'b'): an empty array that BUILD fills.
      arity(3, "_reconstruct");
      if (As<Global>(args[0], "_reconstruct's class") != Global::kNdarray) {
        Unsupported("_reconstruct of a class other than numpy.ndarray");
      }
      Shape s = ShapeOf(args[1], "_reconstruct's shape");
      if (s != Shape{0}) Corrupt("_reconstruct's shape is not (0,)");
      if (As<BytesObj>(args[2], "_reconstruct's typecode").view != "b") {
        Corrupt("_reconstruct's typecode is not b'b'");
      }
      return std::make_shared<Obj>(Obj{ArrayObj{}});
    }
    case Global::kScalar: {
      // A numpy scalar (numpy.float32(1.5)): scalar(dtype, b'<item bytes>'),
      // read as a 0-d array.
      arity(2, "scalar");
      DTypeObj& dt = As<DTypeObj>(args[0], "scalar's dtype");
      if (!dt.built) Corrupt("scalar's dtype has no state (BUILD)");
      if (!std::holds_alternative<BytesObj>(args[1]->v)) {
        Unsupported(fmt::format("scalar given as a {} (object scalars are not supported)",
                                KindName(*args[1])));
      }
      ArrayObj a;
      a.array.dtype = dt.name;
      a.array.data = Materialize({}, dt, false, std::get<BytesObj>(args[1]->v).view);
      a.built = true;
      return std::make_shared<Obj>(Obj{std::move(a)});
    }
    case Global::kDType: {
      // numpy.dtype('f4', False, True); BUILD then sets the byte order.
      arity(3, "numpy.dtype");
      const std::string& code = As<std::string>(args[0], "the dtype code");
      As<bool>(args[1], "dtype's align flag");
      As<bool>(args[2], "dtype's copy flag");
      if (const NumpyType* t = NumpyTypeByCode(code)) {
        return std::make_shared<Obj>(Obj{DTypeObj{t->name, t->size, '=', false}});
      }
      Unsupported(
          fmt::format("numpy dtype '{}' is not supported (supported: float16/32/64, "
                      "int8/16/32/64, uint8, uint16, bool)",
                      code));
    }
    case Global::kFromBuffer: {
      // Protocol 5: _frombuffer(bytearray, dtype, shape, 'C' | 'F').
      arity(4, "_frombuffer");
      std::string_view bytes = As<BytesObj>(args[0], "_frombuffer's buffer").view;
      DTypeObj& dt = As<DTypeObj>(args[1], "_frombuffer's dtype");
      if (!dt.built) Corrupt("_frombuffer's dtype has no state (BUILD)");
      Shape shape = ShapeOf(args[2], "_frombuffer's shape");
      const std::string& order = As<std::string>(args[3], "_frombuffer's order");
      if (order != "C" && order != "F") Corrupt(fmt::format("_frombuffer order '{}'", order));
      ArrayObj a;
      a.array.dtype = dt.name;
      a.array.data = Materialize(shape, dt, order == "F", bytes);
      a.array.shape = std::move(shape);
      a.built = true;
      return std::make_shared<Obj>(Obj{std::move(a)});
    }
    case Global::kCodecsEncode: {
      // Protocol 2 writes bytes as _codecs.encode('<latin-1 text>', 'latin1').
      arity(2, "_codecs.encode");
      const std::string& text = As<std::string>(args[0], "_codecs.encode's text");
      if (As<std::string>(args[1], "_codecs.encode's encoding") != "latin1") {
        Unsupported("_codecs.encode with an encoding other than latin1");
      }
      auto o = std::make_shared<Obj>(Obj{BytesObj{}});
      BytesObj& b = std::get<BytesObj>(o->v);
      if (!Latin1FromUtf8(text, &b.owned)) Corrupt("latin1 text holds a character above U+00FF");
      b.view = b.owned;
      return o;
    }
    case Global::kBytes:
      // Protocol 2 writes b'' as bytes().
      arity(0, "bytes");
      return BytesOf({});
    case Global::kNdarray:
      break;
  }
  Unsupported("calling numpy.ndarray directly");
}

void Parser::Build(const ObjPtr& obj, const ObjPtr& state_obj) {
  std::vector<ObjPtr>& st = As<std::vector<ObjPtr>>(state_obj, "BUILD state");
  if (auto* dt = std::get_if<DTypeObj>(&obj->v)) {
    // (3, '<', None, None, None, -1, -1, flags): version, byte order,
    // subarray, names, fields, elsize, alignment, flags. Version 4 adds
    // metadata; elsize/alignment other than -1 are structured types.
    if (dt->built) Corrupt("numpy.dtype state set twice");
    if (st.size() != 8 || As<int64_t>(st[0], "dtype state version") != 3) {
      Unsupported("numpy.dtype state other than version 3 (8 items)");
    }
    const std::string& order = As<std::string>(st[1], "dtype byte order");
    if (order.size() != 1 || std::string_view("<>|=").find(order[0]) == std::string_view::npos) {
      Corrupt(fmt::format("dtype byte order '{}'", order));
    }
    if (order[0] == '|' && dt->itemsize != 1) {
      Corrupt(fmt::format("byte order '|' for {}", dt->name));
    }
    for (int i = 2; i < 5; ++i) {
      if (!std::holds_alternative<NoneObj>(st[i]->v)) {
        Unsupported("structured or subarray numpy dtype");
      }
    }
    if (As<int64_t>(st[5], "dtype elsize") != -1 || As<int64_t>(st[6], "dtype alignment") != -1) {
      Unsupported("structured numpy dtype (elsize/alignment set)");
    }
    As<int64_t>(st[7], "dtype flags");
    dt->byteorder = order[0];
    dt->built = true;
    return;
  }
  if (auto* a = std::get_if<ArrayObj>(&obj->v)) {
    // (1, shape, dtype, is_fortran, data bytes): ndarray.__setstate__.
    if (a->built) Corrupt("numpy.ndarray state set twice");
    if (st.size() != 5 || As<int64_t>(st[0], "ndarray state version") != 1) {
      Unsupported("numpy.ndarray state other than version 1 (5 items)");
    }
    Shape shape = ShapeOf(st[1], "the array shape");
    DTypeObj& dt = As<DTypeObj>(st[2], "the array dtype");
    if (!dt.built) Corrupt("the array's dtype has no state (BUILD)");
    bool fortran = As<bool>(st[3], "the array's fortran flag");
    if (!std::holds_alternative<BytesObj>(st[4]->v)) {
      Unsupported(fmt::format("array data given as a {} (object arrays are not supported)",
                              KindName(*st[4])));
    }
    a->array.dtype = dt.name;
    a->array.data = Materialize(shape, dt, fortran, std::get<BytesObj>(st[4]->v).view);
    a->array.shape = std::move(shape);
    a->built = true;
    return;
  }
  Unsupported(fmt::format("BUILD of a {}", KindName(*obj)));
}

void Parser::SetItems(DictObj& dict, std::vector<ObjPtr>& items) {
  if (items.size() % 2 != 0) Corrupt("odd number of items for a dict");
  for (size_t i = 0; i < items.size(); i += 2) {
    const std::string& key = As<std::string>(items[i], "a dict key");
    auto* a = std::get_if<ArrayObj>(&items[i + 1]->v);
    if (!a) {
      Unsupported(fmt::format("the value of '{}' is a {}, not a numpy array", key,
                              KindName(*items[i + 1])));
    }
    if (!a->built) Corrupt(fmt::format("the array of '{}' has no state (BUILD)", key));
    // One array under several keys (a memo reference) shares its bytes here
    // but is copied by callers; bounding the repeats by the input size keeps
    // a small hostile file from expanding into terabytes.
    if (!seen_buffers_.insert(a->array.data.get()).second) {
      repeated_bytes_ += a->array.data->size();
      if (repeated_bytes_ > in_.size()) {
        Corrupt(
            fmt::format("arrays repeated under several keys ('{}' ...) add up to more bytes "
                        "than the file holds",
                        key));
      }
    }
    PickledArray entry = a->array;
    entry.name = key;
    // A repeated key replaces the value and keeps its first position.
    auto [it, fresh] = dict.index.emplace(key, dict.entries.size());
    if (fresh)
      dict.entries.push_back(std::move(entry));
    else
      dict.entries[it->second] = std::move(entry);
  }
}

void Parser::Step(uint8_t op) {
  switch (op) {
    case 0x80: {  // PROTO
      uint8_t v = Read<uint8_t>("the protocol number");
      if (op_pos_ != 0) Corrupt("PROTO after the start");
      if (v < 2 || v > 5) Unsupported(fmt::format("pickle protocol {} (2 to 5 are read)", v));
      return;
    }
    case 0x95: {  // FRAME: a length prefix only; opcodes inside read as usual
      uint64_t n = Read<uint64_t>("the frame length");
      if (n > Left()) Take(n, "the frame");  // reports the truncation
      return;
    }
    case '.':  // STOP
      stopped_ = true;
      return;
    case '(':
      if (marks_.size() >= kMaxStack) Corrupt("too many MARKs");
      marks_.push_back(stack_.size());
      return;
    case 'N':
      return Push(std::make_shared<Obj>(Obj{NoneObj{}}));
    case 0x88:
      return Push(std::make_shared<Obj>(Obj{true}));
    case 0x89:
      return Push(std::make_shared<Obj>(Obj{false}));
    case 'K':
      return Push(std::make_shared<Obj>(Obj{int64_t{Read<uint8_t>("BININT1")}}));
    case 'M':
      return Push(std::make_shared<Obj>(Obj{int64_t{Read<uint16_t>("BININT2")}}));
    case 'J':
      return Push(std::make_shared<Obj>(Obj{int64_t{Read<int32_t>("BININT")}}));
    case 0x8a: {  // LONG1: n little-endian two's-complement bytes
      uint8_t n = Read<uint8_t>("the LONG1 length");
      std::string_view b = Take(n, "the LONG1 value");
      if (n > 8) Unsupported(fmt::format("an integer of {} bytes", n));
      uint64_t v = 0;
      for (size_t i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(b[i])} << (8 * i);
      if (n > 0 && n < 8 && (static_cast<uint8_t>(b[n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);
      return Push(std::make_shared<Obj>(Obj{static_cast<int64_t>(v)}));
    }
    case 0x8c:  // SHORT_BINUNICODE
      return Push(std::make_shared<Obj>(Obj{Str(Take(Read<uint8_t>("length"), "the string"))}));
    case 'X':  // BINUNICODE
      return Push(std::make_shared<Obj>(Obj{Str(Take(Read<uint32_t>("length"), "the string"))}));
    case 0x8d:  // BINUNICODE8
      return Push(std::make_shared<Obj>(Obj{Str(Take(Read<uint64_t>("length"), "the string"))}));
    case 'C':
      return Push(BytesOf(Take(Read<uint8_t>("length"), "the bytes")));
    case 'B':
      return Push(BytesOf(Take(Read<uint32_t>("length"), "the bytes")));
    case 0x8e:  // BINBYTES8
    case 0x96:  // BYTEARRAY8 (protocol 5, in-band buffer)
      return Push(BytesOf(Take(Read<uint64_t>("length"), "the bytes")));
    case ')':
      return Push(std::make_shared<Obj>(Obj{std::vector<ObjPtr>{}}));
    case 0x85:
    case 0x86:
    case 0x87: {  // TUPLE1..3
      std::vector<ObjPtr> items(op - 0x84);
      for (size_t i = items.size(); i-- > 0;) items[i] = Pop();
      return Push(Tuple(std::move(items)));
    }
    case 't':
      return Push(Tuple(PopMark()));
    case '}':
      return Push(std::make_shared<Obj>(Obj{DictObj{}}));
    case 's': {  // SETITEM
      std::vector<ObjPtr> kv(2);
      kv[1] = Pop();
      kv[0] = Pop();
      return SetItems(As<DictObj>(Top(), "SETITEM's target"), kv);
    }
    case 'u': {  // SETITEMS
      std::vector<ObjPtr> items = PopMark();
      return SetItems(As<DictObj>(Top(), "SETITEMS' target"), items);
    }
    case 'c': {  // GLOBAL "module\nname\n"
      auto line = [&](const char* what) {
        size_t nl = in_.find('\n', pos_);
        if (nl == std::string_view::npos) Take(Left() + 1, what);  // reports the truncation
        std::string s = Str(in_.substr(pos_, nl - pos_));
        pos_ = nl + 1;
        return s;
      };
      std::string module = line("the module name");
      return Push(Resolve(module, line("the global name")));
    }
    case 0x93: {  // STACK_GLOBAL
      ObjPtr name = Pop();
      ObjPtr module = Pop();
      return Push(Resolve(As<std::string>(module, "the module name"),
                          As<std::string>(name, "the global name")));
    }
    case 'R': {  // REDUCE
      ObjPtr args = Pop();
      ObjPtr callable = Pop();
      Global g = As<Global>(callable, "the callable");
      return Push(Reduce(g, As<std::vector<ObjPtr>>(args, "the arguments")));
    }
    case 'b': {  // BUILD
      ObjPtr state = Pop();
      return Build(Top(), state);
    }
    case 'q':
      return Memo(Read<uint8_t>("the memo index"));  // BINPUT
    case 'r':
      return Memo(Read<uint32_t>("the memo index"));  // LONG_BINPUT
    case 0x94:
      return Memo(memo_.size());  // MEMOIZE
    case 'h':
      return Recall(Read<uint8_t>("the memo index"));  // BINGET
    case 'j':
      return Recall(Read<uint32_t>("the memo index"));  // LONG_BINGET
    case 0x97:
    case 0x98:
      Unsupported("out-of-band buffers (pickle protocol 5 buffer_callback)");
    default:
      if (IsPickleOpcode(op)) Unsupported("opcode not in the supported subset");
      Corrupt(fmt::format("0x{:02x} is not a pickle opcode", op));
  }
}

std::vector<PickledArray> Parser::Run() {
  if (in_.empty()) Fail(ErrorKind::kDataLoss, "{}: empty file, not a pickle", source_);
  if (static_cast<uint8_t>(in_[0]) != 0x80) {
    Fail(ErrorKind::kDataLoss,
         "{}: not a pickle of protocol 2 to 5 (starts with byte 0x{:02x}, not PROTO 0x80)", source_,
         static_cast<uint8_t>(in_[0]));
  }
  while (!stopped_) {
    op_pos_ = pos_;
    if (Left() == 0) {
      Fail(ErrorKind::kDataLoss, "{}: truncated: the pickle ends at byte {} without STOP", source_,
           pos_);
    }
    op_ = static_cast<uint8_t>(in_[pos_++]);
    Step(op_);
  }
  if (!marks_.empty() || stack_.size() != 1) {
    Corrupt(fmt::format("STOP with {} objects and {} MARKs on the stack", stack_.size(),
                        marks_.size()));
  }
  if (pos_ != in_.size()) Corrupt(fmt::format("{} bytes after STOP", in_.size() - pos_));
  return std::move(As<DictObj>(stack_[0], "the pickled object").entries);
}

}  // namespace

std::vector<PickledArray> ParseArrayPickle(std::string_view bytes, const std::string& source) {
  return Parser(bytes, source).Run();
}

std::vector<PickledArray> ReadArrayPickle(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    Fail(ErrorKind::kInvalidArgument, "checkpoint '{}' is a directory, expected a file", path);
  }
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) Fail(ErrorKind::kNotFound, "checkpoint file '{}' not found or not readable", path);
  std::streamoff size = in.tellg();
  if (size < 0) Fail(ErrorKind::kDataLoss, "checkpoint file '{}': cannot tell its size", path);
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), size)) {
    Fail(ErrorKind::kDataLoss, "checkpoint file '{}': read error", path);
  }
  return ParseArrayPickle(bytes, path);
}

}  // namespace tiller::paddle
