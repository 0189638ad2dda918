// Paddle readers: ProgramDesc, PIR JSON, tensor records and LoadModel, on
// inputs built here. ProgramDesc bytes come from a small protobuf wire
// encoder written from the field numbers in docs/PADDLE_FORMATS.md, an
// independent check of framework.proto (and the test then needs no libprotobuf).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "paddle_wire.h"
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "frontend/paddle/program.h"

namespace tiller::paddle {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using namespace ::tiller::paddle_wire;  // NOLINT: test helpers
using ::tiller::paddle_wire::Slot;       // not paddle::Slot, the program type

Pb Attr(const std::string& name, int type) {
  return Pb().Bytes(1, name).Int(2, type);
}

Pb Op(const std::string& type, const std::vector<Pb>& ins, const std::vector<Pb>& outs,
      const std::vector<Pb>& attrs = {}) {
  Pb op;
  op.Bytes(3, type);
  for (const auto& i : ins) op.Msg(1, i);
  for (const auto& o : outs) op.Msg(2, o);
  for (const auto& a : attrs) op.Msg(4, a);
  return op;
}

std::string Program(const std::vector<Pb>& vars, const std::vector<Pb>& ops) {
  Pb block;
  block.Int(1, 0).Int(2, -1);
  for (const auto& v : vars) block.Msg(3, v);
  for (const auto& o : ops) block.Msg(4, o);
  return Pb().Msg(1, block).Msg(4, Pb().Int(1, 3003001)).str();
}

// ---- Tensor records -------------------------------------------------------


std::string Record(int dtype, const std::vector<int64_t>& dims, const std::string& data,
                   const std::vector<std::vector<uint64_t>>& lod = {}) {
  std::string r;
  Put<uint32_t>(r, 0);
  Put<uint64_t>(r, lod.size());
  for (const auto& level : lod) {
    Put<uint64_t>(r, level.size() * 8);
    for (uint64_t o : level) Put<uint64_t>(r, o);
  }
  Put<uint32_t>(r, 0);
  std::string desc = TensorDesc(dtype, dims).str();
  Put<int32_t>(r, static_cast<int32_t>(desc.size()));
  return r + desc + data;
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// ---- Files ------------------------------------------------------------------

class PaddleReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("tiller_reader_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& bytes) {
    return WriteFile(dir_, name, bytes);
  }
  fs::path dir_;
};

// Runs `fn`, expecting a tiller::Error of `kind` whose message has every
// string in `parts`.
template <typename Fn>
void ExpectError(Fn fn, ErrorKind kind, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const auto& p : parts) EXPECT_THAT(e.what(), HasSubstr(p));
  }
}

// A small legacy inference program: two feeds (cols out of op order), a
// matmul carrying one attribute of every kind, and two fetches.
std::string SampleProgram() {
  std::vector<Pb> vars = {ListVar("feed", kFeed),       ListVar("fetch", kFetch),
                          Var("x", kF32, {-1, 4}),      Var("ids", kI64, {-1}),
                          Var("w", kF32, {4, 3}, true), Var("b", kF32, {3}, true),
                          Var("y", kF32, {-1, 3}),      Var("z", kF32, {-1, 3})};
  Pb block_attr = Attr("sub_block", aBlock);
  block_attr.Int(12, 1);
  std::vector<Pb> attrs = {
      Attr("i", aInt).Int(3, -7),
      Attr("l", aLong).Int(13, int64_t{1} << 40),
      Attr("f", aFloat).Float(4, 0.5f),
      Attr("d", aFloat64).Double(19, 0.25),
      Attr("s", aString).Bytes(5, "NCHW"),
      Attr("is", aInts).Int(6, 1).Int(6, -2),
      Attr("ls", aLongs).Int(15, 3).Int(15, int64_t{1} << 35),
      Attr("fs", aFloats).Float(7, 1.5f).Float(7, -2.0f),
      Attr("ds", aFloat64s).Double(16, 0.125),
      Attr("trans_x", aBoolean).Int(10, 1),
      Attr("bs", aBooleans).Int(11, 1).Int(11, 0),
      Attr("ss", aStrings).Bytes(8, "a").Bytes(8, "b"),
      Attr("sc_i", aScalar).Msg(20, Pb().Int(1, 2).Int(3, 9)),
      Attr("sc_d", aScalar).Msg(20, Pb().Int(1, 3).Double(4, 1.25)),
      Attr("sc_b", aScalar).Msg(20, Pb().Int(1, 1).Int(2, 1)),
      Attr("scs_i", aScalars).Msg(21, Pb().Int(1, 2).Int(3, 4)).Msg(21, Pb().Int(1, 2).Int(3, 5)),
      Attr("scs_d", aScalars)
          .Msg(21, Pb().Int(1, 2).Int(3, 4))
          .Msg(21, Pb().Int(1, 3).Double(4, 0.5)),
      block_attr,
      Attr("op_callstack", aStrings).Bytes(8, "File x.py, line 1"),
  };
  std::vector<Pb> ops = {
      Op("feed", {Slot("X", {"feed"})}, {Slot("Out", {"ids"})}, {Attr("col", aInt).Int(3, 1)}),
      Op("feed", {Slot("X", {"feed"})}, {Slot("Out", {"x"})}, {Attr("col", aInt).Int(3, 0)}),
      Op("matmul_v2", {Slot("X", {"x"}), Slot("Y", {"w"})}, {Slot("Out", {"y"})}, attrs),
      Op("elementwise_add", {Slot("X", {"y"}), Slot("Y", {"b"})}, {Slot("Out", {"z"})},
         {Attr("axis", aInt).Int(3, -1)}),
      Op("fetch", {Slot("X", {"z"})}, {Slot("Out", {"fetch"})}, {Attr("col", aInt).Int(3, 1)}),
      Op("fetch", {Slot("X", {"y"})}, {Slot("Out", {"fetch"})}, {Attr("col", aInt).Int(3, 0)}),
  };
  return Program(vars, ops);
}

// Params for SampleProgram, in sorted-name order: b, w.
std::string SampleParams() {
  return Record(kF32, {3}, Bytes(std::vector<float>{1, 2, 3})) +
         Record(kF32, {4, 3}, Bytes(std::vector<float>(12, 0.5f)));
}

TEST_F(PaddleReaderTest, ProgramDescOpsAttrsFeedFetch) {
  std::string path = Write("model.pdmodel", SampleProgram());
  paddle::Program p = ReadProgramDesc(path);
  EXPECT_EQ(p.format, "pdmodel");
  EXPECT_EQ(p.path, path);
  EXPECT_EQ(p.feed_names, (std::vector<std::string>{"x", "ids"}));
  EXPECT_EQ(p.fetch_names, (std::vector<std::string>{"y", "z"}));
  EXPECT_EQ(p.param_names, (std::vector<std::string>{"b", "w"}));
  ASSERT_EQ(p.ops.size(), 2u);  // feed and fetch ops removed
  const OpDesc& mm = p.ops[0];
  EXPECT_EQ(mm.type, "matmul_v2");
  EXPECT_EQ(mm.index, 2);
  EXPECT_EQ(mm.Inputs("Y"), (std::vector<std::string>{"w"}));
  EXPECT_TRUE(mm.Inputs("Bias").empty());
  EXPECT_EQ(mm.Describe(), "matmul_v2 #2 (out: y)");
  const ir::AttrMap& a = mm.attrs;
  EXPECT_EQ(std::get<int64_t>(*a.Find("i")), -7);
  EXPECT_EQ(std::get<int64_t>(*a.Find("l")), int64_t{1} << 40);
  EXPECT_EQ(std::get<double>(*a.Find("f")), 0.5);
  EXPECT_EQ(std::get<double>(*a.Find("d")), 0.25);
  EXPECT_EQ(std::get<std::string>(*a.Find("s")), "NCHW");
  EXPECT_EQ(std::get<std::vector<int64_t>>(*a.Find("is")), (std::vector<int64_t>{1, -2}));
  EXPECT_EQ(std::get<std::vector<int64_t>>(*a.Find("ls")),
            (std::vector<int64_t>{3, int64_t{1} << 35}));
  EXPECT_EQ(std::get<std::vector<double>>(*a.Find("fs")), (std::vector<double>{1.5, -2.0}));
  EXPECT_EQ(std::get<std::vector<double>>(*a.Find("ds")), (std::vector<double>{0.125}));
  EXPECT_EQ(std::get<bool>(*a.Find("trans_x")), true);
  EXPECT_EQ(std::get<std::vector<int64_t>>(*a.Find("bs")), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(std::get<std::vector<std::string>>(*a.Find("ss")),
            (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(std::get<int64_t>(*a.Find("sc_i")), 9);
  EXPECT_EQ(std::get<double>(*a.Find("sc_d")), 1.25);
  EXPECT_EQ(std::get<bool>(*a.Find("sc_b")), true);
  EXPECT_EQ(std::get<std::vector<int64_t>>(*a.Find("scs_i")), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(std::get<std::vector<double>>(*a.Find("scs_d")), (std::vector<double>{4, 0.5}));
  EXPECT_FALSE(a.Has("sub_block"));
  EXPECT_FALSE(a.Has("op_callstack"));

  const VarInfo* x = p.FindVar("x");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->dtype, DType::kF32);
  EXPECT_EQ(x->dims, (Shape{-1, 4}));
  EXPECT_FALSE(x->persistable);
  EXPECT_EQ(p.FindVar("ids")->dtype, DType::kI64);
  EXPECT_TRUE(p.FindVar("w")->persistable);
  EXPECT_FALSE(p.FindVar("feed")->is_dense_tensor);
  EXPECT_FALSE(p.FindVar("fetch")->is_dense_tensor);
  EXPECT_EQ(p.FindVar("nope"), nullptr);
}

TEST_F(PaddleReaderTest, ProgramDescMissingFile) {
  std::string path = (dir_ / "absent.pdmodel").string();
  ExpectError([&] { ReadProgramDesc(path); }, ErrorKind::kNotFound, {path});
}

TEST_F(PaddleReaderTest, ProgramDescCorrupt) {
  std::string garbage = Write("garbage.pdmodel", std::string("\xff\xff\xff\xff garbage", 12));
  ExpectError([&] { ReadProgramDesc(garbage); }, ErrorKind::kDataLoss, {garbage});
  std::string empty = Write("empty.pdmodel", "");
  ExpectError([&] { ReadProgramDesc(empty); }, ErrorKind::kDataLoss, {empty, "block 0"});
  // Every prefix either parses (protobuf has no length header) or fails as
  // data loss; none may crash or throw anything else.
  std::string full = SampleProgram();
  for (size_t cut = 0; cut < full.size(); cut += 3) {
    std::string path = Write("cut.pdmodel", full.substr(0, cut));
    try {
      ReadProgramDesc(path);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kDataLoss) << cut << ": " << e.what();
    }
  }
}

TEST_F(PaddleReaderTest, CombinedParamsRead) {
  std::string file = Record(kF32, {2, 3}, Bytes(std::vector<float>{1, 2, 3, 4, 5, 6})) +
                     Record(kI64, {2}, Bytes(std::vector<int64_t>{-1, 1LL << 40}), {{0, 1, 2}}) +
                     Record(kF16, {}, Bytes(std::vector<uint16_t>{0x3c00})) +
                     Record(kBool, {0, 5}, "");
  std::string path = Write("p.pdiparams", file);
  ParamMap m = ReadCombinedParams(path, {"a", "b", "c", "d"});
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m["a"].dtype, DType::kF32);
  EXPECT_EQ(m["a"].dims, (Shape{2, 3}));
  EXPECT_EQ(m["a"].data->as<float>()[5], 6.0f);
  EXPECT_EQ(m["b"].dtype, DType::kI64);
  EXPECT_EQ(m["b"].data->as<int64_t>()[1], 1LL << 40);
  EXPECT_EQ(m["c"].dims, Shape{});
  EXPECT_EQ(m["c"].data->size(), 2u);
  EXPECT_EQ(m["d"].data->size(), 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m["a"].data->data()) % AlignedBuffer::kAlignment, 0u);
}

TEST_F(PaddleReaderTest, CombinedParamsEveryTruncationThrows) {
  std::string r0 = Record(kF32, {2, 3}, Bytes(std::vector<float>(6, 1.0f)), {{0, 2}});
  std::string file = r0 + Record(kI32, {4}, Bytes(std::vector<int32_t>{1, 2, 3, 4}));
  for (size_t cut = 0; cut < file.size(); ++cut) {
    std::string path = Write("t.pdiparams", file.substr(0, cut));
    bool second = cut >= r0.size();
    ExpectError(
        [&] {
          ReadCombinedParams(path, {"enc.w", "enc.b"});
        },
        ErrorKind::kDataLoss, {path, "truncated"});
    if (second) {
      ExpectError(
          [&] {
            ReadCombinedParams(path, {"enc.w", "enc.b"});
          },
          ErrorKind::kDataLoss, {"record 1 ('enc.b')"});
    }
  }
  // The data of record 0 cut short: the message says how much it needed.
  std::string path = Write("d.pdiparams", file.substr(0, r0.size() - 4));
  ExpectError(
      [&] {
        ReadCombinedParams(path, {"enc.w", "enc.b"});
      },
      ErrorKind::kDataLoss, {"record 0 ('enc.w') needs 24 bytes", "20 left"});
}

TEST_F(PaddleReaderTest, CombinedParamsTrailingBytesAndCount) {
  std::string params = SampleParams();
  std::string trailing = Write("trail.pdiparams", params + "xyz");
  ExpectError(
      [&] {
        ReadCombinedParams(trailing, {"b", "w"});
      },
      ErrorKind::kDataLoss, {trailing, "3 trailing bytes", "2 records"});
  // Fewer names than records: the rest shows up as trailing bytes.
  std::string path = Write("p.pdiparams", params);
  ExpectError([&] { ReadCombinedParams(path, {"b"}); }, ErrorKind::kDataLoss,
              {"trailing bytes", "1 records"});
  // More names than records: truncation at the first missing one.
  ExpectError(
      [&] {
        ReadCombinedParams(path, {"b", "w", "x"});
      },
      ErrorKind::kDataLoss, {"record 2 ('x')", "ends after 2 records", "lists 3 parameters"});
}

TEST_F(PaddleReaderTest, CombinedParamsCorruptHeaders) {
  std::string good = Record(kF32, {2}, Bytes(std::vector<float>{1, 2}));
  auto patched = [&](size_t offset, const std::string& bytes) {
    std::string s = good;
    s.replace(offset, bytes.size(), bytes);
    return s;
  };
  std::string v = Write("v.pdiparams", patched(0, std::string("\x07", 1)));
  ExpectError([&] { ReadCombinedParams(v, {"w"}); }, ErrorKind::kDataLoss,
              {v, "record 0 ('w')", "version 7"});
  // A LoD level count far beyond the file.
  std::string lod = Write("lod.pdiparams", patched(4, std::string(8, '\x7f')));
  ExpectError([&] { ReadCombinedParams(lod, {"w"}); }, ErrorKind::kDataLoss, {"LoD level count"});
  std::string desc = Write("desc.pdiparams", patched(16, std::string("\xff\xff\xff\x7f", 4)));
  ExpectError([&] { ReadCombinedParams(desc, {"w"}); }, ErrorKind::kDataLoss, {"TensorDesc size"});
  // Dims whose product overflows, or is merely huge: fail, never allocate.
  std::string huge = Write("huge.pdiparams", Record(kF32, {1LL << 40, 1LL << 40}, "abcd"));
  ExpectError([&] { ReadCombinedParams(huge, {"w"}); }, ErrorKind::kDataLoss,
              {"record 0 ('w')", "overflows"});
  std::string big = Write("big.pdiparams", Record(kF32, {1LL << 20, 1LL << 20}, "abcd"));
  ExpectError([&] { ReadCombinedParams(big, {"w"}); }, ErrorKind::kDataLoss,
              {"truncated: record 0 ('w') needs 4398046511104 bytes", "4 left"});
  std::string neg = Write("neg.pdiparams", Record(kF32, {-1, 2}, "abcdefgh"));
  ExpectError([&] { ReadCombinedParams(neg, {"w"}); }, ErrorKind::kDataLoss, {"negative dim"});
  std::string cplx = Write("c.pdiparams", Record(23, {1}, "abcdefgh"));
  ExpectError([&] { ReadCombinedParams(cplx, {"w"}); }, ErrorKind::kUnimplemented,
              {"COMPLEX64", "'w'"});
  std::string missing = (dir_ / "none.pdiparams").string();
  ExpectError([&] { ReadCombinedParams(missing, {"w"}); }, ErrorKind::kNotFound, {missing});
}

TEST_F(PaddleReaderTest, CombinedParamsRandomGarbageNeverCrashes) {
  std::mt19937 rng(42);
  std::string good = SampleParams();
  for (int i = 0; i < 300; ++i) {
    std::string s = good;
    for (int flips = 0; flips < 3; ++flips) s[rng() % s.size()] = static_cast<char>(rng());
    std::string path = Write("g.pdiparams", s);
    try {
      ReadCombinedParams(path, {"b", "w"});
    } catch (const Error& e) {
      EXPECT_NE(e.kind(), ErrorKind::kInternal) << e.what();
    }
  }
}

TEST_F(PaddleReaderTest, SeparateParams) {
  Write("sep/b", Record(kF32, {3}, Bytes(std::vector<float>{1, 2, 3})));
  Write("sep/w", Record(kF32, {4, 3}, Bytes(std::vector<float>(12, 0.5f))));
  ParamMap m = ReadSeparateParams((dir_ / "sep").string(), {"b", "w"});
  EXPECT_EQ(m["w"].dims, (Shape{4, 3}));
  ExpectError(
      [&] {
        ReadSeparateParams((dir_ / "sep").string(), {"b", "q"});
      },
      ErrorKind::kNotFound, {"sep/q"});
  Write("sep/t", Record(kF32, {1}, Bytes(std::vector<float>{1})) + "!");
  ExpectError([&] { ReadSeparateParams((dir_ / "sep").string(), {"t"}); }, ErrorKind::kDataLoss,
              {"sep/t", "trailing"});
}

TEST_F(PaddleReaderTest, LoadModelLegacy) {
  Write("m/model.pdmodel", SampleProgram());
  Write("m/model.pdiparams", SampleParams());
  for (const std::string& path : {(dir_ / "m").string(), (dir_ / "m/model.pdmodel").string()}) {
    Model model = LoadModel(path, "");
    EXPECT_EQ(model.params.size(), 2u);
    EXPECT_EQ(model.params.at("b").data->as<float>()[2], 3.0f);
  }
  // Old layout: __model__ plus one file per parameter.
  Write("old/__model__", SampleProgram());
  Write("old/b", Record(kF32, {3}, Bytes(std::vector<float>{1, 2, 3})));
  Write("old/w", Record(kF32, {4, 3}, Bytes(std::vector<float>(12, 0.5f))));
  EXPECT_EQ(LoadModel((dir_ / "old").string(), "").params.size(), 2u);
}

TEST_F(PaddleReaderTest, LoadModelParamMismatch) {
  std::string model = Write("model.pdmodel", SampleProgram());
  std::string shape =
      Write("shape.pdiparams", Record(kF32, {3}, Bytes(std::vector<float>{1, 2, 3})) +
                                   Record(kF32, {3, 4}, Bytes(std::vector<float>(12, 0.5f))));
  ExpectError([&] { LoadModel(model, shape); }, ErrorKind::kDataLoss,
              {"parameter 'w'", "[4, 3]", "[3, 4]", shape});
  std::string dtype =
      Write("dtype.pdiparams", Record(kF32, {3}, Bytes(std::vector<float>{1, 2, 3})) +
                                   Record(kI32, {4, 3}, Bytes(std::vector<int32_t>(12, 1))));
  ExpectError([&] { LoadModel(model, dtype); }, ErrorKind::kDataLoss,
              {"parameter 'w'", "float32", "int32"});
  std::string one = Write("one.pdiparams", Record(kF32, {3}, Bytes(std::vector<float>{1, 2, 3})));
  ExpectError([&] { LoadModel(model, one); }, ErrorKind::kDataLoss,
              {"record 1 ('w')", "lists 2 parameters"});
  std::string three = Write("three.pdiparams", SampleParams() + SampleParams().substr(0, 40));
  ExpectError([&] { LoadModel(model, three); }, ErrorKind::kDataLoss, {"trailing bytes"});
  // No params file next to the model.
  ExpectError([&] { LoadModel(model, ""); }, ErrorKind::kNotFound, {"model.pdiparams"});
  ExpectError([&] { LoadModel((dir_ / "nothing").string(), ""); }, ErrorKind::kNotFound,
              {"nothing"});
}

// ---- PIR --------------------------------------------------------------------

// A PIR program in the shape paddlepaddle 3.3.1 writes (see
// docs/PADDLE_FORMATS.md): parameters, two inputs, folded shape/scalar
// operands, combine/split, an unknown op, and fetches out of col order.
const char* kPir = R"JSON({"base_code":{"magic":"pir","trainable":true,"version":4},
"program":{"regions":[{"#":"region_0","blocks":[{"#":"block_0","args":[],"ops":[
{"#":"p","A":[0,1,1,"fc.b"],"DA":[],"O":{"%":1,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[8],"NCHW",[],0]}},"OA":[1,0,1],"QA":[]},
{"#":"p","A":[0,1,1,"fc.w"],"DA":[],"O":{"%":2,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[4,8],"NCHW",[],0]}},"OA":[1,0,1],"QA":[]},
{"#":"1.data","A":[{"AT":{"#":"0.a_str","D":"x"},"N":"name"},{"AT":{"#":"1.a_intarray","D":[-1,4]},"N":"shape"},{"AT":{"#":"1.a_dtype","D":"float32"},"N":"dtype"},{"AT":{"#":"1.a_place","D":[0,0,""]},"N":"place"}],"I":[],"O":[{"%":3,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[-1,4],"NCHW",[],0]}}]},
{"#":"1.data","A":[{"AT":{"#":"0.a_str","D":"mask"},"N":"name"},{"AT":{"#":"1.a_intarray","D":[-1]},"N":"shape"},{"AT":{"#":"1.a_dtype","D":"int64"},"N":"dtype"},{"AT":{"#":"1.a_place","D":[0,0,""]},"N":"place"}],"I":[],"O":[{"%":4,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_i64"},[-1],"NCHW",[],0]}}]},
{"#":"1.matmul","A":[{"AT":{"#":"0.a_bool","D":false},"N":"transpose_x"},{"AT":{"#":"0.a_bool","D":true},"N":"transpose_y"}],"I":[{"%":3},{"%":2}],"O":[{"%":5,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[-1,8],"NCHW",[],0]}}]},
{"#":"1.add","A":[],"I":[{"%":5},{"%":1}],"O":[{"%":6,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[-1,8],"NCHW",[],0]}}]},
{"#":"1.full","A":[{"AT":{"#":"1.a_intarray","D":[1]},"N":"shape"},{"AT":{"#":"0.a_f64","D":0.5},"N":"value"},{"AT":{"#":"1.a_dtype","D":"float32"},"N":"dtype"},{"AT":{"#":"1.a_place","D":[1,0,""]},"N":"place"}],"I":[],"O":[{"%":7,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[1],"NCHW",[],0]}}]},
{"#":"1.scale","A":[{"AT":{"#":"0.a_f32","D":1.0},"N":"bias"},{"AT":{"#":"0.a_bool","D":true},"N":"bias_after_scale"}],"I":[{"%":6},{"%":7}],"O":[{"%":8,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[-1,8],"NCHW",[],0]}}]},
{"#":"1.full_int_array","A":[{"AT":{"#":"0.a_array","D":[{"#":"0.a_i64","D":-1},{"#":"0.a_i64","D":2},{"#":"0.a_i64","D":4}]},"N":"value"},{"AT":{"#":"1.a_dtype","D":"int64"},"N":"dtype"},{"AT":{"#":"1.a_place","D":[1,0,""]},"N":"place"}],"I":[],"O":[{"%":9,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_i64"},[3],"NCHW",[],0]}}]},
{"#":"1.reshape","A":[],"I":[{"%":8},{"%":9}],"O":[{"%":10,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[-1,2,4],"NCHW",[],0]}}]},
{"#":"1.full","A":[{"AT":{"#":"1.a_intarray","D":[1]},"N":"shape"},{"AT":{"#":"0.a_f64","D":2.0},"N":"value"},{"AT":{"#":"1.a_dtype","D":"int32"},"N":"dtype"},{"AT":{"#":"1.a_place","D":[1,0,""]},"N":"place"}],"I":[],"O":[{"%":11,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_i32"},[1],"NCHW",[],0]}}]},
{"#":"1.split_with_num","A":[{"AT":{"#":"0.a_i32","D":2},"N":"num"}],"I":[{"%":10},{"%":11}],"O":[{"%":12,"TT":{"#":"0.t_vec","D":[{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[-1,2,2],"NCHW",[],0]},{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[-1,2,2],"NCHW",[],0]}]}}]},
{"#":"0.split","A":[],"I":[{"%":12}],"O":[{"%":13,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[-1,2,2],"NCHW",[],0]}},{"%":14,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[-1,2,2],"NCHW",[],0]}}]},
{"#":"0.combine","A":[],"I":[{"%":14},{"%":13}],"O":[{"%":15,"TT":{"#":"0.t_vec","D":[]}}]},
{"#":"1.full","A":[{"AT":{"#":"1.a_intarray","D":[1]},"N":"shape"},{"AT":{"#":"0.a_f64","VD":"-INF"},"N":"value"},{"AT":{"#":"1.a_dtype","D":"float32"},"N":"dtype"},{"AT":{"#":"1.a_place","D":[1,0,""]},"N":"place"}],"I":[],"O":[{"%":16,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[1],"NCHW",[],0]}}]},
{"#":"1.concat","A":[],"I":[{"%":15},{"%":11}],"O":[{"%":17,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[-1,2,4],"NCHW",[],0]}}]},
{"#":"1.dropout","A":[{"AT":{"#":"0.a_bool","D":true},"N":"is_test"},{"AT":{"#":"0.a_str","D":"upscale_in_train"},"N":"mode"},{"AT":{"#":"0.a_i32","D":0},"N":"seed"},{"AT":{"#":"0.a_bool","D":false},"N":"fix_seed"}],"I":[{"%":17},{"%":0},{"%":7}],"O":[{"%":18,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[-1,2,4],"NCHW",[],0]}},{"%":19,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_ui8"},[-1,2,4],"NCHW",[],0]}}]},
{"#":"1.sum","A":[{"AT":{"#":"1.a_dtype","D":"Undefined(ALL_DTYPE)"},"N":"dtype"},{"AT":{"#":"0.a_bool","D":false},"N":"keepdim"}],"I":[{"%":18},{"%":20}],"O":[{"%":21,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[],"NCHW",[],0]}}]},
{"#":"1.frobnicate","A":[{"AT":{"#":"0.a_array","D":[{"#":"0.a_f32","D":0.5},{"#":"0.a_i32","D":2}]},"N":"ratios"}],"I":[{"%":18},{"%":16}],"O":[{"%":22,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[-1],"NCHW",[],0]}}]},
{"#":"1.fetch","A":[{"AT":{"#":"0.a_str","D":"out_b"},"N":"name"},{"AT":{"#":"0.a_i32","D":1},"N":"col"}],"I":[{"%":22}],"O":[{"%":23,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[-1],"NCHW",[],0]}}]},
{"#":"1.fetch","A":[{"AT":{"#":"0.a_str","D":"out_a"},"N":"name"},{"AT":{"#":"0.a_i32","D":0},"N":"col"}],"I":[{"%":18}],"O":[{"%":24,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[-1,2,4],"NCHW",[],0]}}]},
{"#":"1.fetch","A":[{"AT":{"#":"0.a_str","D":"echo"},"N":"name"},{"AT":{"#":"0.a_i32","D":2},"N":"col"}],"I":[{"%":4}],"O":[{"%":25,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_i64"},[-1],"NCHW",[],0]}}]}
]}]}]}})JSON";

// kPir with `from` replaced by `to` (once).
std::string PirWith(const std::string& from, const std::string& to) {
  std::string s = kPir;
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

const OpDesc* FindOp(const paddle::Program& p, const std::string& type) {
  for (const auto& op : p.ops) {
    if (op.type == type) return &op;
  }
  return nullptr;
}

TEST_F(PaddleReaderTest, PirProgramMapsToLegacyForm) {
  // The sum's axis operand (%20) is undefined in kPir; define it first.
  std::string json = PirWith(
      R"({"#":"1.sum")",
      R"({"#":"1.full_int_array","A":[{"AT":{"#":"0.a_array","D":[]},"N":"value"},{"AT":{"#":"1.a_dtype","D":"int64"},"N":"dtype"}],"I":[],"O":[{"%":20,"TT":{"#":"0.t_dtensor","D":[{"#":"0.t_i64"},[0],"NCHW",[],0]}}]},
{"#":"1.sum")");
  std::string path = Write("model.json", json);
  paddle::Program p = ReadPirProgram(path);
  EXPECT_EQ(p.format, "pir");
  EXPECT_EQ(p.feed_names, (std::vector<std::string>{"x", "mask"}));
  EXPECT_EQ(p.fetch_names, (std::vector<std::string>{"out_a", "out_b", "echo"}));
  EXPECT_EQ(p.param_names, (std::vector<std::string>{"fc.b", "fc.w"}));
  EXPECT_TRUE(p.FindVar("fc.w")->persistable);
  EXPECT_EQ(p.FindVar("fc.w")->dims, (Shape{4, 8}));
  EXPECT_EQ(p.FindVar("mask")->dtype, DType::kI64);

  const OpDesc* mm = FindOp(p, "matmul_v2");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->Inputs("X"), (std::vector<std::string>{"x"}));
  EXPECT_EQ(mm->Inputs("Y"), (std::vector<std::string>{"fc.w"}));
  EXPECT_EQ(mm->Outputs("Out"), (std::vector<std::string>{"%5"}));
  EXPECT_TRUE(mm->attrs.Bool("trans_y", false));
  EXPECT_FALSE(mm->attrs.Has("transpose_y"));
  EXPECT_EQ(mm->index, 4);
  EXPECT_EQ(FindOp(p, "elementwise_add")->attrs.Int("axis", 0), -1);
  // Scalar and IntArray operands from full / full_int_array fold into the
  // legacy attributes; the constants are then dropped.
  const OpDesc* scale = FindOp(p, "scale");
  EXPECT_EQ(scale->attrs.Float("scale", 0), 0.5);
  EXPECT_FALSE(scale->HasInput("ScaleTensor"));
  const OpDesc* reshape = FindOp(p, "reshape2");
  EXPECT_EQ(reshape->attrs.Ints("shape"), (std::vector<int64_t>{-1, 2, 4}));
  EXPECT_EQ(reshape->inputs.size(), 1u);
  EXPECT_EQ(FindOp(p, "assign_value"), nullptr);
  // split_with_num + builtin.split -> split with two outputs; combine -> X list.
  const OpDesc* split = FindOp(p, "split");
  EXPECT_EQ(split->Outputs("Out"), (std::vector<std::string>{"%13", "%14"}));
  EXPECT_EQ(split->attrs.Int("num", 0), 2);
  EXPECT_EQ(split->attrs.Int("axis", 0), 2);
  const OpDesc* concat = FindOp(p, "concat");
  EXPECT_EQ(concat->Inputs("X"), (std::vector<std::string>{"%14", "%13"}));
  EXPECT_EQ(concat->attrs.Int("axis", 0), 2);
  // dropout: null seed operand skipped, p folded, mode renamed; its output is
  // fetched once, so it carries the fetch name.
  const OpDesc* dropout = FindOp(p, "dropout");
  EXPECT_FALSE(dropout->HasInput("Seed"));
  EXPECT_EQ(dropout->attrs.Float("dropout_prob", 0), 0.5);
  EXPECT_EQ(dropout->attrs.Str("dropout_implementation", ""), "upscale_in_train");
  EXPECT_EQ(dropout->Outputs("Out"), (std::vector<std::string>{"out_a"}));
  EXPECT_EQ(p.FindVar("%19")->dtype, DType::kU8);
  const OpDesc* sum = FindOp(p, "reduce_sum");
  EXPECT_TRUE(sum->attrs.Bool("reduce_all", false));
  EXPECT_EQ(sum->attrs.Int("out_dtype", 0), -1);
  EXPECT_EQ(p.FindVar("%21")->dims, Shape{});
  // Unknown pd_op: dialect prefix stripped, positional slots, attrs kept.
  const OpDesc* unknown = FindOp(p, "frobnicate");
  ASSERT_NE(unknown, nullptr);
  EXPECT_EQ(unknown->Inputs("in1"), (std::vector<std::string>{"%16"}));
  EXPECT_EQ(unknown->Outputs("out0"), (std::vector<std::string>{"out_b"}));
  EXPECT_EQ(unknown->attrs.Floats("ratios"), (std::vector<double>{0.5, 2.0}));
  const OpDesc* inf = nullptr;
  for (const auto& op : p.ops) {
    if (op.type == "fill_constant") inf = &op;
  }
  ASSERT_NE(inf, nullptr);  // used by frobnicate, so kept
  EXPECT_EQ(inf->attrs.Float("value", 0), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(inf->attrs.Int("dtype", 0), 5);
  // A fetched input keeps its name; an assign gives the output its own.
  const OpDesc& echo = p.ops.back();
  EXPECT_EQ(echo.type, "assign");
  EXPECT_EQ(echo.Inputs("X"), (std::vector<std::string>{"mask"}));
  EXPECT_EQ(echo.Outputs("Out"), (std::vector<std::string>{"echo"}));
  EXPECT_EQ(p.FindVar("echo")->dtype, DType::kI64);
}

TEST_F(PaddleReaderTest, PirCorruptInputs) {
  std::string missing = (dir_ / "no.json").string();
  ExpectError([&] { ReadPirProgram(missing); }, ErrorKind::kNotFound, {missing});
  std::string bad = Write("bad.json", "{\"base_code\": {\"magic\": \"pir\"");
  ExpectError([&] { ReadPirProgram(bad); }, ErrorKind::kDataLoss, {bad, "JSON"});
  std::string magic = Write("magic.json", PirWith("\"magic\":\"pir\"", "\"magic\":\"xyz\""));
  ExpectError([&] { ReadPirProgram(magic); }, ErrorKind::kDataLoss, {magic, "magic"});
  // %20 (the sum's axis) is used but never defined in kPir.
  std::string undefined = Write("undef.json", kPir);
  ExpectError([&] { ReadPirProgram(undefined); }, ErrorKind::kDataLoss,
              {undefined, "1.sum", "%20"});
  std::string type = Write("type.json", PirWith("\"I\":[{\"%\":3},{\"%\":2}]", "\"I\":7"));
  ExpectError([&] { ReadPirProgram(type); }, ErrorKind::kDataLoss, {type, "1.matmul"});
  std::string regions = Write("cf.json", PirWith("{\"#\":\"1.add\",\"A\":[]",
                                                 "{\"#\":\"1.add\",\"regions\":[{}],\"A\":[]"));
  ExpectError([&] { ReadPirProgram(regions); }, ErrorKind::kUnimplemented, {"1.add", "regions"});
  // Every prefix of the file fails cleanly.
  std::string full = kPir;
  for (size_t cut = 0; cut < full.size(); cut += 11) {
    std::string path = Write("cut.json", full.substr(0, cut));
    ExpectError([&] { ReadPirProgram(path); }, ErrorKind::kDataLoss, {path});
  }
}

TEST_F(PaddleReaderTest, LoadModelPir) {
  std::string json = PirWith(R"("I":[{"%":18},{"%":20}])", R"("I":[{"%":18}])");
  Write("pir/model.json", json);
  // Records in sorted parameter_name order: fc.b, fc.w.
  std::string params = Record(kF32, {8}, Bytes(std::vector<float>(8, 1.0f))) +
                       Record(kF32, {4, 8}, Bytes(std::vector<float>(32, 2.0f)));
  Write("pir/model.pdiparams", params);
  Model m = LoadModel((dir_ / "pir").string(), "");
  EXPECT_EQ(m.program.format, "pir");
  EXPECT_EQ(m.params.at("fc.w").data->as<float>()[31], 2.0f);
  std::string swapped =
      Write("pir/swapped.pdiparams", Record(kF32, {4, 8}, Bytes(std::vector<float>(32, 2.0f))) +
                                         Record(kF32, {8}, Bytes(std::vector<float>(8, 1.0f))));
  ExpectError([&] { LoadModel((dir_ / "pir/model.json").string(), swapped); }, ErrorKind::kDataLoss,
              {"parameter 'fc.b'", "[8]", "[4, 8]"});
}

}  // namespace
}  // namespace tiller::paddle
