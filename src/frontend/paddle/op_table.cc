// Builds the `tiller ops` table. The IR-op column is what each translator
// declares at registration (translate.h; checked while translating); notes
// come from the records below; the PIR column inverts the pir_compat table.
#include "frontend/paddle/op_table.h"

#include <algorithm>
#include <map>

#include "frontend/paddle/pir_compat.h"
#include "frontend/paddle/translate.h"
#include "ir/custom_op_registry.h"

namespace tiller::paddle {
namespace {

// Notes per Paddle op (losses and other ops; other families may add theirs).
const std::map<std::string, const char*>& Notes() {
  static const std::map<std::string, const char*> r = {
      {"softmax_with_cross_entropy", "hard/soft labels, any axis"},
      {"cross_entropy", "probabilities in"},
      {"cross_entropy2", "legacy only; MatchX via cross_entropy{match}; XShape not produced"},
      {"sigmoid_cross_entropy_with_logits", "pos_weight, normalize"},
      {"kldiv_loss", "reduction none/batchmean/mean/sum"},
      {"bce_loss", "log clamped at -100"},
      {"huber_loss", "Out and Residual"},
      {"rank_loss", "legacy only (no Paddle 3 op)"},
      {"warpctc", "padded [T, B, C] with lengths; forward loss only"},
      {"identity_loss", "reduction 0 sum, 1 mean, 2 none"},
      {"print", "logs to stderr every run"},
      {"checkpointoutput", "recompute boundary mark (identity{checkpoint})"},
      {"identity", "pass-through"},
      {"detach", "pass-through"},
      {"yolo_box", "iou_aware, scale_x_y, clip_bbox; one yolo_box per output"},
      {"matmul_v2", "integer operands: mul + reduce_sum"},
      {"matmul", "integer operands: mul + reduce_sum"},
      {"bmm", "integer operands: mul + reduce_sum"},
      {"scale", "run-time ScaleTensor, integer or half x: scale_tensor"},
      {"logsumexp", "max-shifted; empty axis or reduce_all: every axis"},
      {"assign_value", "constant: float32/64, int32/64, bool"},
      {"linear_interp_v2", "float32 (interp takes int32/int64 for nearest only)"},
      {"bilinear_interp_v2", "float32 (interp takes int32/int64 for nearest only)"},
      {"bicubic_interp_v2", "float32 (interp takes int32/int64 for nearest only)"},
      {"trilinear_interp_v2", "float32 (interp takes int32/int64 for nearest only)"},
  };
  return r;
}

}  // namespace

std::vector<OpTableRow> PaddleOpTable() {
  std::map<std::string, std::vector<std::string>> pir;
  // Only mapped names: the PIR reader cannot bind the operands of an
  // unmapped op to legacy slots.
  for (const auto& [name, entry] : AllPirOpCompat()) pir[entry->legacy_type].push_back(name);
  std::map<std::string, std::string> custom;
  for (const auto& [type, lib] : custom_op::Loaded()) custom[type] = lib;
  std::vector<OpTableRow> rows;
  for (const std::string& op : SupportedPaddleOps()) {
    OpTableRow row;
    row.paddle_op = op;
    auto p = pir.find(op);
    if (p != pir.end()) row.pir_names = p->second;
    if (const std::vector<std::string>* ir = TranslatorIrOps(op)) {
      row.ir_ops = *ir;
      row.ir_ops_declared = true;
      std::sort(row.ir_ops.begin(), row.ir_ops.end());
    }
    auto it = Notes().find(op);
    if (it != Notes().end()) row.notes = it->second;
    auto c = custom.find(op);
    if (c != custom.end()) row.notes = "custom op from " + c->second;
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace tiller::paddle
