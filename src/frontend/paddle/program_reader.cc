// ReadProgramDesc: a legacy ProgramDesc (model.pdmodel / __model__) into the
// neutral Program form. Only block 0 is converted; sub-blocks (control flow)
// are left to translation to reject by op type.
#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "core/error.h"
#include "core/memory_cap.h"
#include "framework.pb.h"
#include "frontend/paddle/program.h"
#include "frontend/paddle/reader_util.h"

namespace tiller::paddle {
namespace {

namespace pb = ::paddle::framework::proto;

ir::Attribute ScalarValue(const pb::Scalar& s, const std::string& path, const std::string& where) {
  switch (s.type()) {
    case pb::Scalar::BOOLEAN:
      return s.b();
    case pb::Scalar::LONG:
      return static_cast<int64_t>(s.i());
    case pb::Scalar::FLOAT64:
      return s.r();
    default:
      Fail(ErrorKind::kUnimplemented, "{}: {}: complex scalar attributes are not supported", path,
           where);
  }
}

// Returns false for attributes that have no IR form (block references,
// variable references) and are skipped.
bool ConvertAttr(const pb::OpDesc::Attr& a, const std::string& path, const std::string& where,
                 ir::Attribute* out) {
  switch (a.type()) {
    case pb::INT:
      *out = static_cast<int64_t>(a.i());
      return true;
    case pb::LONG:
      *out = static_cast<int64_t>(a.l());
      return true;
    case pb::FLOAT:
      *out = static_cast<double>(a.f());
      return true;
    case pb::FLOAT64:
      *out = a.float64();
      return true;
    case pb::STRING:
      *out = a.s();
      return true;
    case pb::BOOLEAN:
      *out = a.b();
      return true;
    case pb::INTS:
      *out = std::vector<int64_t>(a.ints().begin(), a.ints().end());
      return true;
    case pb::LONGS:
      *out = std::vector<int64_t>(a.longs().begin(), a.longs().end());
      return true;
    case pb::FLOATS:
      *out = std::vector<double>(a.floats().begin(), a.floats().end());
      return true;
    case pb::FLOAT64S:
      *out = std::vector<double>(a.float64s().begin(), a.float64s().end());
      return true;
    case pb::BOOLEANS: {
      std::vector<int64_t> v;
      for (bool b : a.bools()) v.push_back(b ? 1 : 0);
      *out = std::move(v);
      return true;
    }
    case pb::STRINGS:
      *out = std::vector<std::string>(a.strings().begin(), a.strings().end());
      return true;
    case pb::SCALAR:
      *out = ScalarValue(a.scalar(), path, where);
      return true;
    case pb::SCALARS: {
      // assign_value `values`: ints stay exact when every element is an int
      // (int64 constants above 2^53 would not survive a double).
      bool all_int = std::all_of(a.scalars().begin(), a.scalars().end(), [](const pb::Scalar& s) {
        return s.type() == pb::Scalar::LONG || s.type() == pb::Scalar::BOOLEAN;
      });
      if (all_int) {
        std::vector<int64_t> v;
        for (const auto& s : a.scalars()) v.push_back(s.type() == pb::Scalar::LONG ? s.i() : s.b());
        *out = std::move(v);
      } else {
        std::vector<double> v;
        for (const auto& s : a.scalars()) {
          ir::Attribute e = ScalarValue(s, path, where);
          if (auto* d = std::get_if<double>(&e))
            v.push_back(*d);
          else if (auto* i = std::get_if<int64_t>(&e))
            v.push_back(static_cast<double>(*i));
          else
            v.push_back(std::get<bool>(e) ? 1.0 : 0.0);
        }
        *out = std::move(v);
      }
      return true;
    }
    case pb::BLOCK:
    case pb::BLOCKS:
    case pb::VAR:
    case pb::VARS:
      return false;
  }
  return false;
}

VarInfo ConvertVar(const pb::VarDesc& v) {
  VarInfo info;
  info.name = v.name();
  info.persistable = v.persistable();
  info.is_parameter = v.is_parameter();
  info.need_check_feed = v.need_check_feed();
  const pb::VarType& t = v.type();
  info.var_type = t.type();
  info.is_dense_tensor = t.type() == pb::VarType::DENSE_TENSOR && t.has_dense_tensor();
  if (info.is_dense_tensor) {
    const auto& td = t.dense_tensor().tensor();
    // A tensor of an element type Tiller has no DType for is reported when
    // it is used (a parameter record, a feed), not here.
    if (!DTypeFromVarType(td.data_type(), &info.dtype)) info.is_dense_tensor = false;
    info.dims.assign(td.dims().begin(), td.dims().end());
  }
  return info;
}

std::pair<int64_t, std::string> FeedFetchCol(const OpDesc& op, const char* slot) {
  const auto& names = std::string(slot) == "Out" ? op.Outputs("Out") : op.Inputs("X");
  return {op.attrs.Int("col", -1), names.empty() ? std::string() : names[0]};
}

// One field's bytes, tag included, appended to `rest`; false when the field
// is malformed. Groups (wire types 3 and 4) are not used by framework.proto.
// `base` is where `in`'s positions count from.
bool CopyField(google::protobuf::io::CodedInputStream& in, uint32_t tag, const char* base,
               int start, std::string* rest) {
  bool ok = false;
  switch (tag & 7) {
    case 0: {
      uint64_t v = 0;
      ok = in.ReadVarint64(&v);
      break;
    }
    case 1:
      ok = in.Skip(8);
      break;
    case 2: {
      uint32_t n = 0;
      ok = in.ReadVarint32(&n) && n <= static_cast<uint32_t>(INT_MAX) &&
           in.Skip(static_cast<int>(n));
      break;
    }
    case 5:
      ok = in.Skip(4);
      break;
    default:
      break;
  }
  if (ok) rest->append(base + start, static_cast<size_t>(in.CurrentPosition() - start));
  return ok;
}

// A length-delimited field's payload: its offset in `bytes` and size.
bool ReadPayload(google::protobuf::io::CodedInputStream& in, int* offset, int* size) {
  uint32_t n = 0;
  if (!in.ReadVarint32(&n) || n > static_cast<uint32_t>(INT_MAX)) return false;
  *offset = in.CurrentPosition();
  *size = static_cast<int>(n);
  return in.Skip(*size);
}

bool MergeRest(const std::string& rest, google::protobuf::MessageLite* msg) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(rest.data()),
                                            static_cast<int>(rest.size()));
  return msg->MergePartialFromCodedStream(&in) && in.ConsumedEntireMessage();
}

// ParsePartialFromString, a block and an op at a time: a program of 10^6
// ops takes hundreds of MB as messages, and protobuf's one call would take
// them all before the host memory budget could be checked. Blocks' vars and
// ops (fields 3, 4 of BlockDesc; blocks are field 1 of ProgramDesc) are
// parsed one message each; every other field is gathered and merged, so the
// result equals the one-call parse.
bool ParseProgramDescIncrementally(const std::string& bytes, pb::ProgramDesc* desc) {
  using google::protobuf::io::CodedInputStream;
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() > static_cast<size_t>(INT_MAX)) return false;
  CodedInputStream in(data, static_cast<int>(bytes.size()));
  std::string rest;
  size_t ops = 0;
  while (true) {
    const int start = in.CurrentPosition();
    const uint32_t tag = in.ReadTag();
    if (tag == 0) break;
    if (tag != ((1u << 3) | 2u)) {
      if (!CopyField(in, tag, bytes.data(), start, &rest)) return false;
      continue;
    }
    int offset = 0, size = 0;
    if (!ReadPayload(in, &offset, &size)) return false;
    pb::BlockDesc* block = desc->add_blocks();
    CodedInputStream bin(data + offset, size);
    std::string block_rest;
    while (true) {
      const int bstart = bin.CurrentPosition();
      const uint32_t btag = bin.ReadTag();
      if (btag == 0) break;
      const bool var = btag == ((3u << 3) | 2u), op = btag == ((4u << 3) | 2u);
      if (!var && !op) {
        if (!CopyField(bin, btag, bytes.data() + offset, bstart, &block_rest)) return false;
        continue;
      }
      int o = 0, n = 0;
      if (!ReadPayload(bin, &o, &n)) return false;
      google::protobuf::MessageLite* m =
          var ? static_cast<google::protobuf::MessageLite*>(block->add_vars()) : block->add_ops();
      if (!m->ParsePartialFromArray(data + offset + o, n)) return false;
      if (op && ++ops % 4096 == 0)
        CheckHostMemory(fmt::format("parsing op {} of the protobuf program", ops));
    }
    if (bin.CurrentPosition() != size || !MergeRest(block_rest, block)) return false;
  }
  return in.CurrentPosition() == static_cast<int>(bytes.size()) && MergeRest(rest, desc);
}

}  // namespace

Program ReadProgramDesc(const std::string& path) {
  std::string bytes = ReadFileBytes(path, "Paddle program");
  pb::ProgramDesc desc;
  // ParsePartial + IsInitialized rather than ParseFromString: the same
  // checks, but the missing field is named in our message instead of being
  // logged to stderr by protobuf.
  if (!ParseProgramDescIncrementally(bytes, &desc)) {
    Fail(ErrorKind::kDataLoss,
         "{}: not a valid Paddle ProgramDesc ({} bytes could not be parsed as protobuf; a "
         "Paddle 3 PIR program is a .json file)",
         path, bytes.size());
  }
  if (!desc.IsInitialized()) {
    Fail(ErrorKind::kDataLoss, "{}: corrupt Paddle ProgramDesc: missing required fields: {}", path,
         desc.InitializationErrorString());
  }
  if (desc.blocks_size() == 0) Fail(ErrorKind::kDataLoss, "{}: ProgramDesc has no block 0", path);
  const pb::BlockDesc& block = desc.blocks(0);

  Program prog;
  prog.path = path;
  prog.format = "pdmodel";
  for (const auto& v : block.vars()) prog.vars[v.name()] = ConvertVar(v);

  std::vector<std::pair<int64_t, std::string>> feeds, fetches;
  int index = 0;
  for (const auto& pop : block.ops()) {
    if (index % 4096 == 0 && index)
      CheckHostMemory(fmt::format("reading op {} of {}", index, block.ops_size()));
    OpDesc op;
    op.type = pop.type();
    op.index = index++;
    for (const auto& v : pop.inputs()) {
      op.inputs.emplace_back(v.parameter(),
                             std::vector<std::string>(v.arguments().begin(), v.arguments().end()));
    }
    for (const auto& v : pop.outputs()) {
      op.outputs.emplace_back(v.parameter(),
                              std::vector<std::string>(v.arguments().begin(), v.arguments().end()));
    }
    for (const auto& a : pop.attrs()) {
      // Python stack traces of the exporting script: large and never needed.
      if (a.name() == "op_callstack") continue;
      ir::Attribute value;
      if (ConvertAttr(a, path,
                      fmt::format("op {} ({}) attribute '{}'", op.index, op.type, a.name()),
                      &value)) {
        op.attrs.Set(a.name(), std::move(value));
      }
    }
    if (op.type == "feed") {
      feeds.push_back(FeedFetchCol(op, "Out"));
    } else if (op.type == "fetch") {
      fetches.push_back(FeedFetchCol(op, "X"));
    } else {
      prog.ops.push_back(std::move(op));
    }
  }
  // Inputs and outputs are positional by `col`, not by op order.
  auto by_col = [&](std::vector<std::pair<int64_t, std::string>>& v, const char* what) {
    std::stable_sort(v.begin(), v.end());
    std::vector<std::string> names;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i].first != static_cast<int64_t>(i) || v[i].second.empty()) {
        Fail(ErrorKind::kDataLoss, "{}: {} ops do not cover columns 0..{} exactly (col {} -> '{}')",
             path, what, v.size() - 1, v[i].first, v[i].second);
      }
      names.push_back(v[i].second);
    }
    return names;
  };
  prog.feed_names = by_col(feeds, "feed");
  prog.fetch_names = by_col(fetches, "fetch");

  // Decided on the proto type, not VarInfo::is_dense_tensor: a persistable
  // tensor of an unsupported element type still has a record in the params
  // file, and skipping it would misreport the file as corrupt.
  for (const auto& v : block.vars()) {
    if (v.persistable() && v.type().type() == pb::VarType::DENSE_TENSOR && v.name() != "feed" &&
        v.name() != "fetch") {
      prog.param_names.push_back(v.name());
    }
  }
  std::sort(prog.param_names.begin(), prog.param_names.end());
  prog.param_names.erase(std::unique(prog.param_names.begin(), prog.param_names.end()),
                         prog.param_names.end());
  return prog;
}

}  // namespace tiller::paddle
