// The table `tiller ops` prints: per Paddle op type with a translator, the
// PIR (pd_op) names that map onto it, the IR ops it becomes and notes.
#pragma once

#include <string>
#include <vector>

namespace tiller::paddle {

struct OpTableRow {
  std::string paddle_op;               // legacy spelling
  std::vector<std::string> pir_names;  // pd_op names (without "pd_op."); may be empty
  std::string ir_ops;                  // IR op(s) the translator emits, when recorded
  std::string notes;
};

// Sorted by Paddle op type; includes op types of loaded custom-op libraries.
std::vector<OpTableRow> PaddleOpTable();

}  // namespace tiller::paddle
