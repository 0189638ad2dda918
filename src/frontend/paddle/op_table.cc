// Builds the `tiller ops` table. Translators are opaque functions, so the
// IR-op column and notes come from the records below (kept next to the
// family that owns them); the PIR column inverts the pir_compat table.
#include "frontend/paddle/op_table.h"

#include <algorithm>
#include <map>

#include "frontend/paddle/pir_compat.h"
#include "frontend/paddle/translate.h"
#include "runtime/custom_op_registry.h"

namespace tiller::paddle {
namespace {


struct Record {
  const char* ir_ops;
  const char* notes;
};

// IR ops and notes per Paddle op (losses and other ops; other families may
// add theirs here).
const std::map<std::string, Record>& Records() {
  static const std::map<std::string, Record> r = {
      {"softmax_with_cross_entropy", {"softmax, cross_entropy", "hard/soft labels, any axis"}},
      {"cross_entropy", {"cross_entropy", "probabilities in"}},
      {"cross_entropy2", {"cross_entropy{match}", "legacy only; XShape not produced"}},
      {"sigmoid_cross_entropy_with_logits", {"sigmoid_cross_entropy", "pos_weight, normalize"}},
      {"kldiv_loss", {"kldiv, reduce_sum|reduce_mean, div", "reduction none/batchmean/mean/sum"}},
      {"bce_loss", {"bce", "log clamped at -100"}},
      {"huber_loss", {"huber, sub", "Out and Residual"}},
      {"rank_loss", {"rank_loss", "legacy only (no Paddle 3 op)"}},
      {"warpctc", {"ctc_loss", "padded [T, B, C] with lengths; forward loss only"}},
      {"identity_loss", {"reduce_sum|reduce_mean", "reduction 0 sum, 1 mean, 2 none"}},
      {"print", {"print", "logs to stderr every run"}},
      {"checkpointoutput", {"identity{checkpoint}", "recompute boundary mark"}},
      {"identity", {"(none)", "pass-through"}},
      {"detach", {"(none)", "pass-through"}},
      {"yolo_box", {"yolo_box{output}", "iou_aware, scale_x_y, clip_bbox"}},
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
    auto it = Records().find(op);
    if (it != Records().end()) {
      row.ir_ops = it->second.ir_ops;
      row.notes = it->second.notes;
    }
    auto c = custom.find(op);
    if (c != custom.end()) {
      row.ir_ops = "custom";
      row.notes = "custom op from " + c->second;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace tiller::paddle
