// The table `tiller ops` prints: per Paddle op type with a translator, the
// PIR (pd_op) names that map onto it, the IR ops it becomes (as its
// translator declares them) and notes.
#pragma once

#include <string>
#include <vector>

namespace tiller::paddle {

struct OpTableRow {
  std::string paddle_op;               // legacy spelling
  std::vector<std::string> pir_names;  // pd_op names (without "pd_op."); may be empty
  std::vector<std::string> ir_ops;     // IR ops the translator can emit (sorted)
  bool ir_ops_declared = false;        // false: the translator did not declare them
  std::string notes;
};

// Sorted by Paddle op type; includes op types of loaded custom-op libraries.
std::vector<OpTableRow> PaddleOpTable();

}  // namespace tiller::paddle
