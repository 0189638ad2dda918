// The PIR -> legacy op table. Operand order and names come from the op
// signatures of paddlepaddle 3.3.1 (Operation.get_input_names() on exported
// programs); legacy names from Paddle's op_compat.yaml and the legacy
// programs the same version writes. docs/PADDLE_FORMATS.md lists the table.
#include "frontend/paddle/pir_compat.h"

#include <map>

#include "core/error.h"

namespace tiller::paddle {
namespace {

using pir::Drop;
using pir::IntArray;
using pir::Scalar;
using pir::T;

using Table = std::map<std::string, PirOpCompat>;

void AddUnary(Table& t, const char* pir, const char* legacy,
              std::vector<std::pair<std::string, std::string>> renames = {},
              ir::AttrMap fixed = {}) {
  t[pir] = {legacy, {T("X")}, {"Out"}, std::move(renames), std::move(fixed)};
}

void AddBinary(Table& t, const char* pir, const char* legacy) {
  // Legacy elementwise/compare ops carry `axis`; PIR broadcasts numpy-style,
  // which is axis = -1.
  t[pir] = {legacy, {T("X"), T("Y")}, {"Out"}, {}, {{"axis", int64_t{-1}}}};
}

void AddReduce(Table& t, const char* pir, const char* legacy) {
  // reduce_all is derived from `dim` by the reader (empty dim = all axes).
  t[pir] = {legacy,
            {T("X"), IntArray("dim", "DimTensor", "DimTensorList")},
            {"Out"},
            {{"keepdim", "keep_dim"}, {"dtype", "out_dtype"}},
            {}};
}

Table BuildTable() {
  Table t;
  // Elementwise binary and comparison ops.
  AddBinary(t, "add", "elementwise_add");
  AddBinary(t, "subtract", "elementwise_sub");
  AddBinary(t, "multiply", "elementwise_mul");
  AddBinary(t, "divide", "elementwise_div");
  AddBinary(t, "maximum", "elementwise_max");
  AddBinary(t, "minimum", "elementwise_min");
  AddBinary(t, "elementwise_pow", "elementwise_pow");
  AddBinary(t, "floor_divide", "elementwise_floordiv");
  AddBinary(t, "remainder", "elementwise_mod");
  for (const char* op :
       {"equal", "not_equal", "less_than", "less_equal", "greater_than", "greater_equal"}) {
    AddBinary(t, op, op);
  }
  for (const char* op : {"logical_and", "logical_or", "logical_xor"}) {
    t[op] = {op, {T("X"), T("Y")}, {"Out"}, {}, {}};
  }

  // Unary ops whose legacy spelling matches.
  for (const char* op :
       {"relu",    "tanh",        "sigmoid",     "exp",   "sqrt",  "rsqrt",       "log",
        "abs",     "silu",        "log1p",       "erf",   "floor", "ceil",        "sign",
        "square",  "reciprocal",  "sin",         "cos",   "round", "assign",      "logsigmoid",
        "mish",    "softsign",    "logical_not", "isnan", "isinf", "isfinite",    "gelu",
        "softmax", "log_softmax", "elu",         "celu",  "selu",  "softplus"}) {
    AddUnary(t, op, op);
  }
  // Paddle 2.x spelled these with an underscore.
  AddUnary(t, "hardswish", "hard_swish");
  AddUnary(t, "share_data", "share_data");  // Tensor.detach() in PIR programs
  AddUnary(t, "hardsigmoid", "hard_sigmoid");
  AddUnary(t, "leaky_relu", "leaky_relu", {{"negative_slope", "alpha"}});
  AddUnary(t, "relu6", "relu6", {}, {{"threshold", 6.0}});
  AddUnary(t, "swish", "swish", {}, {{"beta", 1.0}});
  AddUnary(t, "pow", "pow", {{"y", "factor"}});
  AddUnary(t, "mean_all", "mean");
  t["clip"] = {"clip", {T("X"), Scalar("min", "Min"), Scalar("max", "Max")}, {"Out"}, {}, {}};
  t["scale"] = {"scale", {T("X"), Scalar("scale", "ScaleTensor")}, {"Out"}, {}, {}};
  t["cast"] = {"cast", {T("X")}, {"Out"}, {{"dtype", "out_dtype"}}, {}};

  // Linear algebra, embeddings, normalization, convolution, pooling.
  t["matmul"] = {"matmul_v2",
                 {T("X"), T("Y")},
                 {"Out"},
                 {{"transpose_x", "trans_x"}, {"transpose_y", "trans_y"}},
                 {}};
  t["bmm"] = {"bmm", {T("X"), T("Y")}, {"Out"}, {}, {}};
  t["embedding"] = {"lookup_table_v2", {T("Ids"), T("W")}, {"Out"}, {}, {}};
  t["layer_norm"] = {
      "layer_norm", {T("X"), T("Scale"), T("Bias")}, {"Y", "Mean", "Variance"}, {}, {}};
  t["batch_norm"] = {"batch_norm",
                     {T("X"), T("Mean"), T("Variance"), T("Scale"), T("Bias")},
                     {"Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance", "ReserveSpace"},
                     {{"data_format", "data_layout"}},
                     {}};
  t["batch_norm_"] = t["batch_norm"];
  t["group_norm"] = {"group_norm",
                     {T("X"), T("Scale"), T("Bias")},
                     {"Y", "Mean", "Variance"},
                     {{"data_format", "data_layout"}},
                     {}};
  t["instance_norm"] = {"instance_norm",
                        {T("X"), T("Scale"), T("Bias")},
                        {"Y", "SavedMean", "SavedVariance"},
                        {},
                        {}};
  for (const char* op : {"conv2d", "depthwise_conv2d", "conv3d"}) {
    t[op] = {op, {T("Input"), T("Filter")}, {"Output"}, {}, {}};
  }
  for (const char* op : {"conv2d_transpose", "depthwise_conv2d_transpose"}) {
    t[op] = {op,
             {T("Input"), T("Filter"),
              IntArray("output_size", "OutputSizeTensor", "OutputSizeTensorList")},
             {"Output"},
             {},
             {}};
  }
  t["pool2d"] = {
      "pool2d", {T("X"), IntArray("ksize", "KSizeTensor", "KSizeTensorList")}, {"Out"}, {}, {}};
  t["dropout"] = {"dropout",
                  {T("X"), T("Seed"), Scalar("dropout_prob", "DropoutProbTensor")},
                  {"Out", "Mask"},
                  {{"mode", "dropout_implementation"}},
                  {}};

  // Shape manipulation.
  t["reshape"] = {
      "reshape2", {T("X"), IntArray("shape", "Shape", "ShapeTensor")}, {"Out", "XShape"}, {}, {}};
  t["transpose"] = {"transpose2", {T("X")}, {"Out", "XShape"}, {{"perm", "axis"}}, {}};
  t["flatten"] = {"flatten_contiguous_range", {T("X")}, {"Out", "XShape"}, {}, {}};
  t["squeeze"] = {"squeeze2",
                  {T("X"), IntArray("axes", "AxesTensor", "AxesTensorList")},
                  {"Out", "XShape"},
                  {},
                  {}};
  t["unsqueeze"] = {"unsqueeze2",
                    {T("X"), IntArray("axes", "AxesTensor", "AxesTensorList")},
                    {"Out", "XShape"},
                    {},
                    {}};
  t["concat"] = {"concat", {T("X"), Scalar("axis", "AxisTensor")}, {"Out"}, {}, {}};
  t["stack"] = {"stack", {T("X")}, {"Y"}, {}, {}};
  t["split"] = {"split",
                {T("X"), IntArray("sections", "SectionsTensor", "SectionsTensorList"),
                 Scalar("axis", "AxisTensor")},
                {"Out"},
                {},
                {{"num", int64_t{0}}}};
  t["split_with_num"] = {"split", {T("X"), Scalar("axis", "AxisTensor")}, {"Out"}, {}, {}};
  t["slice"] = {"slice",
                {T("Input"), IntArray("starts", "StartsTensor", "StartsTensorList"),
                 IntArray("ends", "EndsTensor", "EndsTensorList")},
                {"Out"},
                {},
                {}};
  t["strided_slice"] = {"strided_slice",
                        {T("Input"), IntArray("starts", "StartsTensor", "StartsTensorList"),
                         IntArray("ends", "EndsTensor", "EndsTensorList"),
                         IntArray("strides", "StridesTensor", "StridesTensorList")},
                        {"Out"},
                        {},
                        {}};
  t["expand"] = {
      "expand_v2", {T("X"), IntArray("shape", "Shape", "expand_shapes_tensor")}, {"Out"}, {}, {}};
  t["expand_as"] = {"expand_as_v2", {T("X"), T("Y")}, {"Out"}, {}, {}};
  t["tile"] = {"tile",
               {T("X"), IntArray("repeat_times", "RepeatTimes", "repeat_times_tensor")},
               {"Out"},
               {},
               {}};
  t["shape"] = {"shape", {T("Input")}, {"Out"}, {}, {}};
  t["shape64"] = t["shape"];

  // Indexing, reductions, search.
  t["gather"] = {"gather", {T("X"), T("Index"), Scalar("axis", "Axis")}, {"Out"}, {}, {}};
  t["gather_nd"] = {"gather_nd", {T("X"), T("Index")}, {"Out"}, {}, {}};
  t["index_select"] = {"index_select", {T("X"), T("Index")}, {"Out"}, {{"axis", "dim"}}, {}};
  t["where"] = {"where", {T("Condition"), T("X"), T("Y")}, {"Out"}, {}, {}};
  t["masked_fill"] = {"masked_fill", {T("X"), T("Mask"), T("Value")}, {"Out"}, {}, {}};
  AddReduce(t, "mean", "reduce_mean");
  AddReduce(t, "sum", "reduce_sum");
  AddReduce(t, "max", "reduce_max");
  AddReduce(t, "min", "reduce_min");
  AddReduce(t, "prod", "reduce_prod");
  AddReduce(t, "all", "reduce_all");
  AddReduce(t, "any", "reduce_any");
  t["add_n"] = {"sum", {T("X")}, {"Out"}, {}, {}};
  t["argmax"] = {"arg_max", {T("X"), Scalar("axis", "AxisTensor")}, {"Out"}, {}, {}};
  t["argmin"] = {"arg_min", {T("X"), Scalar("axis", "AxisTensor")}, {"Out"}, {}, {}};
  t["topk"] = {"top_k_v2", {T("X"), Scalar("k", "K")}, {"Out", "Indices"}, {}, {}};
  t["cumsum"] = {"cumsum", {T("X"), Scalar("axis", "AxisTensor")}, {"Out"}, {}, {}};
  t["one_hot"] = {"one_hot_v2", {T("X"), Scalar("depth", "depth_tensor")}, {"Out"}, {}, {}};

  // Constants and creation. pd_op.full / pd_op.full_int_array are rewritten
  // by the reader itself (fill_constant / assign_value) and have no entry.
  t["full_like"] = {"fill_any_like", {T("X"), Scalar("value", "ValueTensor")}, {"Out"}, {}, {}};
  t["full_with_tensor"] = {"fill_constant",
                           {T("ValueTensor"), IntArray("shape", "ShapeTensor", "ShapeTensorList")},
                           {"Out"},
                           {},
                           {}};
  t["assign_value"] = {"assign_value", {}, {"Out"}, {}, {}};
  t["assign_value_"] = {"assign_value", {Drop()}, {"Out"}, {}, {}};
  t["arange"] = {"range", {T("Start"), T("End"), T("Step")}, {"Out"}, {}, {}};

  // Interpolation, einsum.
  for (const char* op : {"nearest_interp", "bilinear_interp", "bicubic_interp", "linear_interp"}) {
    t[op] = {std::string(op) + "_v2",
             {T("X"), T("OutSize"), T("SizeTensor"), T("Scale")},
             {"Out"},
             {},
             {}};
  }
  t["einsum"] = {"einsum", {T("Operands")}, {"Out", "InnerCache", "XShape"}, {}, {}};
  return t;
}

// Entries registered from translator files; kept apart from the built-in
// table because registration runs during static initialization.
Table& Registered() {
  static Table table;
  return table;
}

}  // namespace

bool RegisterPirOpCompat(const std::string& pir_name, PirOpCompat entry) {
  bool inserted = Registered().emplace(pir_name, std::move(entry)).second;
  TILLER_CHECK(inserted, "PIR op '{}' mapped twice", pir_name);
  return true;
}

static const Table& FullTable() {
  static const Table kTable = [] {
    Table t = BuildTable();
    for (auto& [k, v] : Registered()) {
      TILLER_CHECK(t.emplace(k, v).second, "PIR op '{}' mapped twice", k);
    }
    return t;
  }();
  return kTable;
}

std::vector<std::pair<std::string, const PirOpCompat*>> AllPirOpCompat() {
  std::vector<std::pair<std::string, const PirOpCompat*>> out;
  for (const auto& [name, entry] : FullTable()) out.emplace_back(name, &entry);
  return out;
}

const PirOpCompat* FindPirOpCompat(const std::string& name) {
  const Table& kTable = FullTable();
  auto it = kTable.find(name);
  if (it == kTable.end() && name.size() > 1 && name.back() == '_') {
    it = kTable.find(name.substr(0, name.size() - 1));
  }
  return it == kTable.end() ? nullptr : &it->second;
}

}  // namespace tiller::paddle
