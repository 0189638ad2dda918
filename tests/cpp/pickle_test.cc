// The .pdparams / .pdopt pickle reader and writer (frontend/paddle/pickle.h):
// round trips of every dtype and shape kind, pickles written by Python
// (protocols 2 and 5, embedded as hex), every truncation point, seeded
// random corruptions (only tiller::Error or a consistent result, also under
// ASan/UBSan), refusals that name the opcode or global, writer errors and
// the atomic replacement of files. Tests against Python itself (pickle.load,
// paddle.static.load) are in tests/python/checkpoint_io_test.py.
#include "frontend/paddle/pickle.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"

namespace tiller::paddle {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace std::string_literals;

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

std::string FromHex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// d = {'f': np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3)),
//      'be': np.arange(3, dtype='>f4'), 's': np.float32(1.5),
//      'e': np.zeros((0, 2), np.float16), 'z': np.array(7, np.int64),
//      'u': np.array([1, 65535], np.uint16)}
// pickle.dumps(d, protocol=2), numpy 2.4: GLOBAL lines, BINPUT/BINGET,
// _codecs.encode for bytes, __builtin__.bytes for b'', a Fortran array, a
// big-endian dtype, a numpy scalar.
const char kPython2[] =
    "80027d7100285801000000667101636e756d70792e5f636f72652e6d756c746961727261790a5f7265636f6e"
    "7374727563740a7102636e756d70790a6e6461727261790a71034b00857104635f636f646563730a656e636f"
    "64650a7105580100000062710658060000006c6174696e31710786710852710987710a52710b284b014b024b"
    "0386710c636e756d70790a64747970650a710d58020000006932710e898887710f527110284b035801000000"
    "3c71114e4e4e4affffffff4affffffff4b0074711262886805580c0000000000030001000400020005007113"
    "680786711452711574711662580200000062657117680268034b00857118680987711952711a284b014b0385"
    "711b680d58020000006634711c898887711d52711e284b0358010000003e711f4e4e4e4affffffff4affffff"
    "ff4b0074712062896805580d000000000000003fc28000004000000071216807867122527123747124625801"
    "000000737125636e756d70792e5f636f72652e6d756c746961727261790a7363616c61720a7126680d580200"
    "0000663471278988877128527129284b0368114e4e4e4affffffff4affffffff4b0074712a62680558050000"
    "000000c3803f712b680786712c52712d86712e52712f5801000000657130680268034b008571316809877132"
    "527133284b014b004b02867134680d5802000000663271358988877136527137284b0368114e4e4e4affffff"
    "ff4affffffff4b007471386289635f5f6275696c74696e5f5f0a62797465730a71392952713a74713b625801"
    "0000007a713c680268034b0085713d680987713e52713f284b0129680d580200000069387140898887714152"
    "7142284b0368114e4e4e4affffffff4affffffff4b0074714362896805580800000007000000000000007144"
    "6807867145527146747147625801000000757148680268034b00857149680987714a52714b284b014b028571"
    "4c680d58020000007532714d898887714e52714f284b0368114e4e4e4affffffff4affffffff4b0074715062"
    "89680558060000000100c3bfc3bf7151680786715252715374715462752e";
// The same dict, protocol 5: FRAME, MEMOIZE, numpy._core.numeric._frombuffer
// over in-band BYTEARRAY8 buffers with order 'C' / 'F'.
const char kPython5[] =
    "800595f9010000000000007d94288c0166948c136e756d70792e5f636f72652e6e756d65726963948c0b5f66"
    "726f6d62756666657294939428960c00000000000000000003000100040002000500948c056e756d7079948c"
    "0564747970659493948c02693294898887945294284b038c013c944e4e4e4affffffff4affffffff4b007494"
    "624b024b0386948c014694749452948c02626594680428960c00000000000000000000003f80000040000000"
    "9468088c02663494898887945294284b038c013e944e4e4e4affffffff4affffffff4b007494624b0385948c"
    "014394749452948c0173948c166e756d70792e5f636f72652e6d756c74696172726179948c067363616c6172"
    "94939468088c02663494898887945294284b03680c4e4e4e4affffffff4affffffff4b0074946243040000c0"
    "3f94869452948c0165946804289600000000000000009468088c02663294898887945294284b03680c4e4e4e"
    "4affffffff4affffffff4b007494624b004b028694681a749452948c017a9468042896080000000000000007"
    "000000000000009468088c02693894898887945294284b03680c4e4e4e4affffffff4affffffff4b00749462"
    "29681a749452948c0175946804289604000000000000000100ffff9468088c02753294898887945294284b03"
    "680c4e4e4e4affffffff4affffffff4b007494624b028594681a74945294752e";

template <typename T>
std::vector<T> Values(const PickledArray& a) {
  std::vector<T> v(a.data->size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), a.data->data(), a.data->size());
  return v;
}

void ExpectPythonDict(const std::vector<PickledArray>& got) {
  ASSERT_EQ(got.size(), 6u);
  std::vector<std::string> names;
  for (const auto& a : got) names.push_back(a.name);
  EXPECT_EQ(names, (std::vector<std::string>{"f", "be", "s", "e", "z", "u"}));
  EXPECT_EQ(got[0].dtype, "int16");
  EXPECT_EQ(got[0].shape, (Shape{2, 3}));
  EXPECT_EQ(Values<int16_t>(got[0]), (std::vector<int16_t>{0, 1, 2, 3, 4, 5}));  // C order
  EXPECT_EQ(got[1].dtype, "float32");
  EXPECT_EQ(Values<float>(got[1]), (std::vector<float>{0, 1, 2}));  // little-endian
  EXPECT_EQ(got[2].shape, Shape{});
  EXPECT_EQ(Values<float>(got[2]), std::vector<float>{1.5f});
  EXPECT_EQ(got[3].dtype, "float16");
  EXPECT_EQ(got[3].shape, (Shape{0, 2}));
  EXPECT_EQ(got[3].data->size(), 0u);
  EXPECT_EQ(got[4].dtype, "int64");
  EXPECT_EQ(Values<int64_t>(got[4]), std::vector<int64_t>{7});
  EXPECT_EQ(got[5].dtype, "uint16");
  EXPECT_EQ(Values<uint16_t>(got[5]), (std::vector<uint16_t>{1, 65535}));
}

TEST(PickleTest, ReadsPythonProtocol2And5) {
  ExpectPythonDict(ParseArrayPickle(FromHex(kPython2), "p2"));
  ExpectPythonDict(ParseArrayPickle(FromHex(kPython5), "p5"));
}

const std::vector<std::string> kDTypes = {"float32", "float64", "float16", "int8",  "uint8",
                                          "int16",   "uint16",  "int32",   "int64", "bool"};

// One array of each dtype and each shape kind, random contents.
std::vector<PickledArray> Sample(uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<Shape> shapes = {{}, {0}, {3}, {2, 3, 4}, {2, 0, 3}, {1, 2, 1, 2, 1}};
  std::vector<PickledArray> out;
  for (const std::string& dt : kDTypes) {
    for (size_t s = 0; s < shapes.size(); ++s) {
      PickledArray a;
      a.name = fmt::format("{}.w_{}", dt, s);
      a.dtype = dt;
      a.shape = shapes[s];
      a.data = std::make_shared<AlignedBuffer>(NumElements(a.shape) * NumpyItemSize(dt));
      for (size_t i = 0; i < a.data->size(); ++i) {
        a.data->as<uint8_t>()[i] = dt == "bool" ? rng() % 2 : static_cast<uint8_t>(rng());
      }
      out.push_back(std::move(a));
    }
  }
  return out;
}

std::vector<ArrayView> Views(const std::vector<PickledArray>& arrays) {
  std::vector<ArrayView> v;
  for (const auto& a : arrays)
    v.push_back({a.name, a.dtype, a.shape, {a.data->data(), a.data->size()}});
  return v;
}

void ExpectSame(const std::vector<PickledArray>& want, const std::vector<PickledArray>& got) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].dtype, want[i].dtype) << want[i].name;
    EXPECT_EQ(got[i].shape, want[i].shape) << want[i].name;
    ASSERT_EQ(got[i].data->size(), want[i].data->size()) << want[i].name;
    if (want[i].data->size() == 0) continue;  // no bytes (and null pointers)
    EXPECT_EQ(0, std::memcmp(got[i].data->data(), want[i].data->data(), want[i].data->size()))
        << want[i].name;
  }
}

TEST(PickleTest, RoundTripsEveryDTypeAndShape) {
  std::vector<PickledArray> arrays = Sample(1);
  std::string bytes = SerializeArrayPickle(Views(arrays));
  // Protocol 4, framed, ends with STOP.
  EXPECT_EQ(bytes.substr(0, 3), std::string("\x80\x04\x95", 3));
  EXPECT_EQ(bytes.back(), '.');
  ExpectSame(arrays, ParseArrayPickle(bytes, "round trip"));
  EXPECT_TRUE(ParseArrayPickle(SerializeArrayPickle({}), "empty").empty());
}

TEST(PickleTest, LargeArraysAndManyEntries) {
  // A payload above the 64 KiB frame target goes outside frames; more than
  // 1000 entries take two SETITEMS batches; memo indices pass 256
  // (LONG_BINGET).
  std::vector<PickledArray> arrays;
  for (int i = 0; i < 1001; ++i) {
    PickledArray a{fmt::format("v{}", i), i % 2 ? "int32" : "float32", {2}, nullptr};
    a.data = std::make_shared<AlignedBuffer>(8);
    a.data->as<int32_t>()[0] = i;
    arrays.push_back(std::move(a));
  }
  PickledArray big{"big", "uint8", {100000}, std::make_shared<AlignedBuffer>(100000)};
  for (size_t i = 0; i < 100000; ++i) big.data->as<uint8_t>()[i] = static_cast<uint8_t>(i * 7);
  arrays.insert(arrays.begin() + 500, std::move(big));
  ExpectSame(arrays, ParseArrayPickle(SerializeArrayPickle(Views(arrays)), "large"));
}

TEST(PickleTest, EveryTruncationThrows) {
  std::vector<PickledArray> arrays = Sample(2);
  arrays.resize(8);
  std::string bytes = SerializeArrayPickle(Views(arrays));
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    try {
      ParseArrayPickle(std::string_view(bytes).substr(0, cut), "cut.pdparams");
      ADD_FAILURE() << "cut at " << cut << " parsed";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kDataLoss) << e.what();
      EXPECT_THAT(e.what(), HasSubstr("cut.pdparams"));
      if (cut > 0) {
        EXPECT_THAT(e.what(), HasSubstr("truncated")) << "cut at " << cut;
      }
    }
  }
  // The frame header catches any cut inside the frame; without it (frames
  // are optional) each opcode's own length check is reached.
  ASSERT_EQ(bytes[2], '\x95');
  std::string frameless = bytes.substr(0, 2) + bytes.substr(11);
  ExpectSame(arrays, ParseArrayPickle(frameless, "frameless"));
  for (const std::string& p : {frameless, FromHex(kPython2), FromHex(kPython5)}) {
    for (size_t cut = 1; cut < p.size(); ++cut) {
      ExpectError([&] { ParseArrayPickle(std::string_view(p).substr(0, cut), "cut"); },
                  ErrorKind::kDataLoss, {"truncated"});
    }
  }
}

TEST(PickleTest, RandomCorruptionsGiveErrorsOrConsistentArrays) {
  std::vector<PickledArray> arrays = Sample(3);
  arrays.resize(12);
  const std::vector<std::string> inputs = {SerializeArrayPickle(Views(arrays)), FromHex(kPython2),
                                           FromHex(kPython5)};
  std::mt19937 rng(20240531);
  int errors = 0, parsed = 0;
  for (int trial = 0; trial < 600; ++trial) {
    std::string bytes = inputs[trial % inputs.size()];
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      size_t at = rng() % bytes.size();
      // Half the time a small change (length fields, memo indices), else any byte.
      bytes[at] =
          static_cast<char>(rng() % 2 ? bytes[at] + 1 + static_cast<int>(rng() % 3) : rng());
    }
    try {
      for (const PickledArray& a : ParseArrayPickle(bytes, "corrupt")) {
        ASSERT_NE(NumpyItemSize(a.dtype), 0u) << a.dtype;
        EXPECT_EQ(a.data->size(), NumElements(a.shape) * NumpyItemSize(a.dtype)) << a.name;
      }
      ++parsed;
    } catch (const Error& e) {
      EXPECT_TRUE(e.kind() == ErrorKind::kDataLoss || e.kind() == ErrorKind::kUnimplemented)
          << e.what();
      ++errors;
    }
  }
  // Most corruptions are caught; a flipped payload byte still parses.
  EXPECT_GT(errors, 300);
  EXPECT_GT(parsed, 10);
}

std::string P4(const std::string& body) {
  return std::string("\x80\x04", 2) + body;
}

TEST(PickleTest, RefusalsNameTheOpcodeOrGlobal) {
  ExpectError([] { ParseArrayPickle(P4("]."), "a.pdopt"); }, ErrorKind::kUnimplemented,
              {"a.pdopt", "byte 2", "EMPTY_LIST"});
  ExpectError([] { ParseArrayPickle(P4("G\x3f\xf0\0\0\0\0\0\0."s), "x"); },
              ErrorKind::kUnimplemented, {"byte 2", "BINFLOAT"});
  ExpectError([] { ParseArrayPickle(P4("\x8c\x02os\x94\x8c\x06system\x94\x93."), "x"); },
              ErrorKind::kUnimplemented, {"byte 16", "STACK_GLOBAL", "global 'os.system'"});
  ExpectError([] { ParseArrayPickle(std::string("\x80\x02") + "cposix\nsystem\n.", "x"); },
              ErrorKind::kUnimplemented, {"GLOBAL", "global 'posix.system'"});
  ExpectError([] { ParseArrayPickle(P4("\x97."), "x"); }, ErrorKind::kUnimplemented,
              {"NEXT_BUFFER", "out-of-band"});
  ExpectError([] { ParseArrayPickle(P4("\xff."), "x"); }, ErrorKind::kDataLoss,
              {"byte 2", "0xff is not a pickle opcode"});
  ExpectError([] { ParseArrayPickle("(dp0\n.", "old.pdparams"); }, ErrorKind::kDataLoss,
              {"old.pdparams", "not a pickle of protocol 2 to 5"});
  ExpectError([] { ParseArrayPickle(std::string("\x80\x06}.", 4), "x"); },
              ErrorKind::kUnimplemented, {"protocol 6"});
  // A dict value that is not an array (an int).
  ExpectError(
      [] {
        ParseArrayPickle(P4("}\x94\x8c\x01"
                            "a\x94K\x01s."),
                         "x");
      },
      ErrorKind::kUnimplemented, {"value of 'a' is a int"});
  // A complex dtype.
  ExpectError(
      [] {
        ParseArrayPickle(P4("\x8c\x05numpy\x8c\x05"
                            "dtype\x93\x8c\x03"
                            "c16\x89\x88\x87R."),
                         "x");
      },
      ErrorKind::kUnimplemented, {"numpy dtype 'c16'"});
  // The object is not a dict; bytes after STOP; STOP with MARKs open.
  ExpectError([] { ParseArrayPickle(P4("N."), "x"); }, ErrorKind::kDataLoss, {"is a None"});
  ExpectError([] { ParseArrayPickle(P4("}.xx"), "x"); }, ErrorKind::kDataLoss,
              {"2 bytes after STOP"});
  ExpectError([] { ParseArrayPickle(P4("}(."), "x"); }, ErrorKind::kDataLoss, {"1 MARKs"});
}

TEST(PickleTest, HostileLengthsFailWithoutAllocating) {
  // BINBYTES8 / BINUNICODE8 / FRAME lengths far beyond the input.
  for (const char* op : {"\x8e", "\x8d", "\x95", "\x96"}) {
    ExpectError(
        [&] { ParseArrayPickle(P4(op + std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8)), "x"); },
        ErrorKind::kDataLoss, {"truncated", "needs 9223372036854775807 bytes"});
  }
  // A memo index far ahead of the memo (a vector would resize to 4G).
  ExpectError([] { ParseArrayPickle(P4("Nr\xff\xff\xff\xff."s), "x"); }, ErrorKind::kDataLoss,
              {"memo index 4294967295 out of sequence"});
  ExpectError([] { ParseArrayPickle(P4("j\xff\xff\xff\x0f."), "x"); }, ErrorKind::kDataLoss,
              {"memo index 268435455 not defined"});
  // An array whose shape multiplies past 2^64, and one whose bytes disagree.
  const std::string dtype =
      "\x8c\x05numpy\x8c\x05"
      "dtype\x93\x8c\x02"
      "f4\x89\x88\x87R(K\x03\x8c\x01<NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb"s;
  const std::string recon =
      "\x8c\x15numpy.core.multiarray\x8c\x0c_reconstruct\x93\x8c\x05numpy\x8c\x07ndarray\x93"
      "K\x00\x85"
      "C\x01"
      "b\x87R"s;
  const std::string huge = "\x8a\x08\0\0\0\0\0\0\0\x40"s;  // LONG1 2^62
  const std::string head =
      "}\x8c\x01"
      "a"s +
      recon;
  ExpectError(
      [&] {
        ParseArrayPickle(P4(head + "(K\x01" + huge + huge + "\x86" + dtype + "\x89" + "C\x00tbs."s),
                         "x");
      },
      ErrorKind::kDataLoss, {"too large"});
  ExpectError(
      [&] {
        ParseArrayPickle(P4(head + "(K\x01K\x02\x85" + dtype + "\x89" + "C\x04" + "abcdtbs."), "x");
      },
      ErrorKind::kDataLoss, {"a float32 [2] array needs 8 bytes, the pickle holds 4"});
  // One 4 KiB array under 10000 keys (BINGET): 40 MB for callers to copy
  // from a 100 KB file. Twice is allowed (aliased weights exist).
  std::string aliased =
      "}(\x8c\x01"
      "a"s +
      recon + "(K\x01M\x00\x04\x85"s + dtype + "\x89" + "B\x00\x10\0\0"s + std::string(4096, 'x') +
      "tb\x94"s;
  for (int i = 0; i < 10000; ++i) aliased += "\x8c\x05" + fmt::format("k{:04d}", i) + "h\x00"s;
  ExpectError([&] { ParseArrayPickle(P4(aliased + "u."), "x"); }, ErrorKind::kDataLoss,
              {"repeated under several keys"});
  auto two = ParseArrayPickle(P4(aliased.substr(0, aliased.size() - 9999 * 9) + "u."), "x");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].name, "k0000");
  EXPECT_EQ(two[1].shape, Shape{1024});
  // Tuples nested a million deep would overflow the C++ stack when freed.
  ExpectError([] { ParseArrayPickle(P4(")" + std::string(1000000, '\x85') + "."), "x"); },
              ErrorKind::kDataLoss, {"TUPLE1", "nested deeper than 32"});
  // Deeply nested MARKs stop at the stack limit instead of growing forever.
  ExpectError([] { ParseArrayPickle(P4(std::string(70000, '(')), "x"); }, ErrorKind::kDataLoss,
              {"too many MARKs"});
}

TEST(PickleTest, WriterRejectsInconsistentArrays) {
  std::vector<std::byte> four(4);
  std::vector<int64_t> s2 = {2}, neg = {-1};
  auto err = [&](std::vector<ArrayView> v, const std::string& part) {
    ExpectError([&] { SerializeArrayPickle(v); }, ErrorKind::kInvalidArgument, {part});
  };
  err({{"a", "complex64", s2, four}}, "dtype 'complex64' cannot be written");
  err({{"a", "float32", s2, four}}, "'a': float32 [2] needs 8 bytes, 4 given");
  err({{"a", "int8", neg, four}}, "negative dimension -1");
  err({{"a", "int8", {}, {four.data(), 1}}, {"a", "int8", {}, {four.data(), 1}}},
      "'a' is given twice");
  err({{"\xff", "int8", {}, {four.data(), 1}}}, "not valid UTF-8");
}

class PickleFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tiller_pickle_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<std::string> Listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  fs::path dir_;
};

TEST_F(PickleFileTest, WritesAtomicallyAndReadsBack) {
  std::string path = (dir_ / "ckpt.pdparams").string();
  std::vector<PickledArray> first = Sample(4), second = Sample(5);
  WriteArrayPickle(path, first);
  ExpectSame(first, ReadArrayPickle(path));
  // Replacing it: the new contents, and no temporary file left behind.
  WriteArrayPickle(path, second);
  ExpectSame(second, ReadArrayPickle(path));
  EXPECT_EQ(Listing(), std::vector<std::string>{"ckpt.pdparams"});
  // A failed save (an inconsistent array) leaves the old file as it was.
  std::vector<PickledArray> bad = Sample(6);
  bad[3].shape = {1000};
  ExpectError([&] { WriteArrayPickle(path, bad); }, ErrorKind::kInvalidArgument, {path, "needs"});
  ExpectSame(second, ReadArrayPickle(path));
  EXPECT_EQ(Listing(), std::vector<std::string>{"ckpt.pdparams"});
}

TEST_F(PickleFileTest, FileErrorsNameThePath) {
  std::string missing_dir = (dir_ / "no" / "such" / "x.pdopt").string();
  ExpectError([&] { WriteArrayPickle(missing_dir, Sample(7)); }, ErrorKind::kNotFound,
              {missing_dir, "No such file or directory"});
  std::string missing = (dir_ / "absent.pdparams").string();
  ExpectError([&] { ReadArrayPickle(missing); }, ErrorKind::kNotFound, {missing});
  std::string empty = (dir_ / "empty.pdopt").string();
  std::ofstream(empty).close();
  ExpectError([&] { ReadArrayPickle(empty); }, ErrorKind::kDataLoss, {empty, "empty file"});
}

TEST(PickleTest, NumpyNames) {
  DType t;
  EXPECT_TRUE(DTypeFromNumpyName("float16", &t));
  EXPECT_EQ(t, DType::kF16);
  EXPECT_FALSE(DTypeFromNumpyName("uint16", &t));  // bfloat16 bits, not a DType of their own
  EXPECT_FALSE(DTypeFromNumpyName("bfloat16", &t));
  EXPECT_STREQ(NumpyNameOf(DType::kBF16), "uint16");
  EXPECT_STREQ(NumpyNameOf(DType::kBool), "bool");
  EXPECT_EQ(NumpyItemSize("int64"), 8u);
  EXPECT_EQ(NumpyItemSize("complex64"), 0u);
}

}  // namespace
}  // namespace tiller::paddle
