// Embedding tables split by rows over data-parallel replicas (the hybrid
// parallelism of recommendation models: the dense layers replicated, the
// tables sharded), on replica `rank` of R, for a table T [V, D] that only
// sparse lookups read and a row update writes:
//
//   y = embedding(T, ids)          y = reshape(gather_rows(T_part, flat(ids))
//                           ==>          {vocabs [V]})                  [N, D]
//   T' = adagrad_rows(T, rows,     i, r = exchange_rows(flat(ids_mine),
//          lr, m, ids_all)                rows_mine){vocabs [V], scales}
//                                  T_part' = adagrad_rows(T_part, r, lr,
//                                      m_part, i){table_rows V, row_begin b}
//
// with T_part and m_part rows [b, e) = PartOf(V, R, rank) of T and m. The
// lookup takes each id's row from the replica that holds it (in process,
// straight out of its part; across processes by asking the owner for it,
// or where a process runs several replicas by gathering the ids and
// reduce-scattering the rows, of which one replica holds each: x + 0 = x,
// the replicated table's bytes). The update gets, in place of the driver's
// gather of every replica's row gradient (ids_all, rows_all), the pairs of
// its own rows (the same pairs in the same order, so the same sums), with
// the driver's scale of the rows applied on the way. An elementwise
// optimizer that reads the row gradient as a dense table (PIR's Adam,
// momentum, rmsprop: every row moves) updates its part from the part's
// rows of that gradient: embedding_grad(i, r){rows: the part's, row_begin b}.
// Every replica thus holds 1 / R of the table and of its optimizer state,
// looks up and updates 1 / R of the rows, and the replicas exchange rows
// instead of tables. All the step's lookups are one gather_rows, and all
// its row gradients one exchange_rows: one meeting of the replicas each.
//
// Where loss scaling steers (the runtime skips an update on non-finite
// gradients) every replica must see every gradient to decide alike: the
// update keeps the gathered row gradients there (ShardOptions::
// exchange_row_gradients), as it does where another op reads them.
//
// The decision reads the forward part only (sparse lookups, no other
// forward reader, not fetched, V >= R), so an evaluation step splits the
// same tables as the training step and both read the same parts. In training, such a
// table whose update does not take rows (an optimizer without a row form,
// gradient accumulation's dense accumulator, a regularizer reading the
// table, lamb's whole-table norms) fails, naming the table and the reader.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <type_traits>
#include <variant>

#include "core/error.h"
#include "ir/ops/optimizer.h"
#include "ir/row_gradient.h"
#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {
namespace {

struct Table {
  ir::Value* state = nullptr;
  std::vector<ir::Op*> lookups;
  // In training, its update: a row optimizer, or an elementwise one reading
  // the row gradient as a dense table.
  ir::Op* update = nullptr;
  // The update's per-element state: (input, output) index pairs.
  std::vector<std::pair<size_t, size_t>> states;
};

bool IsSparseLookup(const ir::Op* op, const ir::Value* table) {
  return op->is(ir::Opcode::embedding) && op->input(0) == table && op->input(1) != table &&
         op->GetBool("sparse") && op->GetInt("table_rows") < 0;
}

// Why the update of `t` cannot be split with it ("" when it can), filling
// t.states.
std::string UpdateRefusal(const ir::Graph& g, Table& t,
                          const std::map<const ir::Value*, const ir::Value*>& update_of) {
  const ir::Op& op = *t.update;
  if (!ir::IsRowOptimizerOp(op.type)) {
    if (op.is(ir::Opcode::lamb)) return "lamb's trust ratio needs the whole table's norms";
    const ir::Value* grad = op.input(1);
    if (!ir::AsRowGradient(grad) || grad->users.size() != 1 || IsGraphOutput(g, grad))
      return fmt::format("its update ({}) reads a gradient that is not the lookups' rows", op.type);
  }
  auto it = update_of.find(t.state);
  if (it == update_of.end() || it->second != op.output(0) || !op.output(0)->users.empty() ||
      IsGraphOutput(g, op.output(0)))
    return fmt::format("its new value from {} is read elsewhere", op.type);
  for (size_t k = 1; k < op.outputs.size(); ++k) {
    const size_t i = ir::OptimizerUpdatedInput(k);
    const ir::Value* s = op.input(i);
    if (s->shape() != t.state->shape()) continue;  // one-element (beta powers)
    auto u = update_of.find(s);
    if (s->kind != ir::ValueKind::kState || u == update_of.end() || u->second != op.output(k) ||
        s->users.size() != 1 || !op.output(k)->users.empty() || IsGraphOutput(g, op.output(k)))
      return fmt::format("its optimizer state '{}' is read elsewhere", s->name);
    t.states.emplace_back(i, k);
  }
  return "";
}

// The tables to split; `kept` counts the others with sparse lookups by
// reason.
std::vector<Table> FindTables(const ir::Graph& g, const ShardOptions& o,
                              std::map<std::string, int>* kept) {
  std::map<const ir::Value*, const ir::Value*> update_of;
  for (const auto& [state, v] : g.state_updates()) update_of[state] = v;
  std::vector<Table> tables;
  for (ir::Value* s : g.states()) {
    Table t;
    t.state = s;
    std::vector<const ir::Op*> forward_others, later_others;
    for (ir::Op* user : s->users) {
      if (IsSparseLookup(user, s)) {
        t.lookups.push_back(user);
      } else if ((ir::IsRowOptimizerOp(user->type) || ir::IsOptimizerOp(user->type)) &&
                 user->input(0) == s && !t.update) {
        t.update = user;
      } else if (user->placement.phase == ir::Phase::kForward) {
        forward_others.push_back(user);
      } else {
        later_others.push_back(user);
      }
    }
    if (t.lookups.empty()) continue;
    if (s->shape().size() != 2 || s->dtype() != DType::kF32) {
      ++(*kept)["not a float32 table"];
      continue;
    }
    if (!forward_others.empty()) {
      ++(*kept)[fmt::format("read by {} too", forward_others[0]->type)];
      continue;
    }
    // A fetched table (its value, or in training its new value) stays
    // whole, in evaluation and training steps alike.
    if (IsGraphOutput(g, s) || (t.update && IsGraphOutput(g, t.update->output(0)))) {
      ++(*kept)["fetched"];
      continue;
    }
    if (s->shape()[0] < o.replicas) {
      ++(*kept)["fewer rows than replicas"];
      continue;
    }
    // From here on an evaluation step splits the table: training must too.
    std::string why;
    if (!later_others.empty())
      why = fmt::format("op {} ({}) reads the whole table", later_others[0]->name,
                        later_others[0]->type);
    else if (t.update)
      why = UpdateRefusal(g, t, update_of);
    if (!why.empty())
      Fail(ErrorKind::kUnimplemented,
           "embedding table '{}' {}: splitting tables by rows over the replicas "
           "(shard_embedding_rows) needs a table that only sparse lookups read and a row "
           "update writes (sgd, adagrad or adam on is_sparse / sparse=True lookups, without "
           "gradient accumulation or a regularizer on the table); turn shard_embedding_rows "
           "off",
           s->name, why);
    tables.push_back(std::move(t));
  }
  return tables;
}

// `ops` (gather_rows or exchange_rows, one table each) as one op over
// their tables: one meeting of the replicas per step instead of one per
// table. It goes where the first of them was, and the ops computing the
// later ones' inputs move before it. `lists`: the per-table attributes.
void MergeCollectives(ir::Graph& g, const std::vector<ir::Op*>& ops,
                      const std::vector<std::string>& lists, const char* what) {
  if (ops.size() < 2) return;
  std::vector<ir::Value*> inputs;
  for (const ir::Op* op : ops) inputs.insert(inputs.end(), op->inputs.begin(), op->inputs.end());
  const ir::Op& first = *ops[0];
  ir::AttrMap attrs{{"parts", first.GetInt("parts")}, {"rank", first.GetInt("rank")}};
  for (const std::string& name : lists) {
    ir::Attribute all = *first.attrs.Find(name);  // the ops' lists end to end
    for (size_t i = 1; i < ops.size(); ++i)
      std::visit(
          [&](auto& list) {
            using L = std::decay_t<decltype(list)>;
            if constexpr (std::is_same_v<L, std::vector<int64_t>> ||
                          std::is_same_v<L, std::vector<double>>) {
              const L& more = std::get<L>(*ops[i]->attrs.Find(name));
              list.insert(list.end(), more.begin(), more.end());
            }
          },
          all);
    attrs.Set(name, std::move(all));
  }
  g.SetInsertionPoint(&first);
  ir::Op* merged = g.AddOp(first.type, inputs, attrs, fmt::format("{} {}", ops.size(), what));
  g.SetInsertionPoint(nullptr);
  size_t out = 0;
  for (const ir::Op* op : ops)
    for (ir::Value* v : op->outputs) g.ReplaceAllUses(v, merged->output(out++));
  g.RemoveOps(
      [&](const ir::Op& op) { return std::find(ops.begin(), ops.end(), &op) != ops.end(); });
  g.ReorderOps(ProducersFirst(g));
}

// Where *ids and *rows are the driver's gathers of one replica's row
// gradient (all_gather(reshape(x)), reshape(all_gather(reshape(y)))): the
// pairs of this replica's rows instead, from exchange_rows(x, y), which
// moves only those (the row update keeps no others).
void Exchange(ir::Graph& g, const ir::Op* update, ir::Value** ids, ir::Value** rows, int64_t vocab,
              const ShardOptions& o, std::vector<ir::Op*>* exchanges) {
  if (!o.exchange_row_gradients) return;
  const ir::Op* unflat = (*rows)->producer;
  ir::Value* x = AllGatheredFrom(*ids);
  ir::Value* y =
      unflat && unflat->is(ir::Opcode::reshape) ? AllGatheredFrom(unflat->input(0)) : nullptr;
  if (!x || !y || y->rank() < 1) return;
  const int64_t n = NumElements(x->shape()), width = (*rows)->shape().back();
  if (NumElements(y->shape()) != n * width) return;
  // The driver pins the gathered gradient for its finiteness check
  // before the update; where nothing but `update` reads it, the pin moves
  // to the exchanged pairs, which hold only rows of the replicas' own
  // gradients (each guarded by its replica) scaled, and zeros: the session
  // does not scan them again where the scale is at most 1
  // (runtime/training_step_compile.cc). Another reader (a program's own
  // check, gradient statistics) keeps the gathers.
  auto only_update = [&](const ir::Value* v) {
    return !IsGraphOutput(g, v) && std::all_of(v->users.begin(), v->users.end(),
                                               [&](const ir::Op* u) { return u == update; });
  };
  ir::Value* pinned_grad = nullptr;  // embedding_grad{sparse}(ids, rows), pinned
  for (const ir::Op* user : (*rows)->users) {
    if (user == update) continue;
    if (user->is(ir::Opcode::embedding_grad) && user->GetBool("sparse") && user->input(0) == *ids &&
        user->input(1) == *rows && only_update(user->output(0))) {
      if (g.IsPinned(user->output(0))) pinned_grad = user->output(0);
      continue;
    }
    return;
  }
  if (IsGraphOutput(g, *rows)) return;
  // The driver's scale of the rows (the mean over replicas) is applied as
  // they are exchanged: one pass over them fewer.
  double scale = 1.0;
  const ir::Op* scaled = y->producer;
  if (scaled && scaled->is(ir::Opcode::scale) && scaled->GetFloat("bias") == 0.0 &&
      scaled->GetBool("bias_after_scale") && y->dtype() == DType::kF32 && y->users.size() == 1) {
    scale = scaled->GetFloat("scale");
    y = scaled->input(0);
  }
  ir::Op* op = g.AddOp("exchange_rows",
                       {g.Add1("reshape", {x}, {{"shape", Shape{n}}}),
                        g.Add1("reshape", {y}, {{"shape", Shape{n, width}}})},
                       {{"vocabs", std::vector<int64_t>{vocab}},
                        {"scales", std::vector<double>{scale}},
                        {"parts", int64_t{o.replicas}},
                        {"rank", int64_t{o.rank}}});
  exchanges->push_back(op);
  if (g.IsPinned(*rows)) g.ReplaceAllUses(*rows, op->output(1));
  if (pinned_grad) {
    const ir::AttrMap attrs = pinned_grad->producer->attrs;
    g.ReplaceAllUses(pinned_grad, g.Add1("embedding_grad", {op->output(0), op->output(1)}, attrs));
  }
  *ids = op->output(0);
  *rows = op->output(1);
}

}  // namespace

int ShardEmbeddingRows(ir::Graph& g, const ShardOptions& o, std::vector<ShardedState>* out,
                       std::string* detail) {
  std::map<std::string, int> kept;
  std::vector<Table> tables = FindTables(g, o, &kept);
  const int64_t parts = o.replicas;
  std::vector<ir::Op*> lookups;    // the gather_rows ops, one per lookup
  std::vector<ir::Op*> exchanges;  // the exchange_rows ops, one per update
  std::vector<ir::Value*> replaced;
  size_t whole_bytes = 0, part_bytes = 0;
  for (Table& t : tables) {
    ir::Value* table = t.state;
    const int64_t vocab = table->shape()[0], width = table->shape()[1];
    const PartRange rows = PartOf(vocab, o.replicas, o.rank);
    const ir::TensorType part_type{table->dtype(), {rows.size(), width}};
    auto split = [&](ir::Value* s) {
      out->push_back({s->name, s->type, {rows.begin * width, rows.end * width}, width});
      replaced.push_back(s);
      whole_bytes += s->bytes();
      part_bytes += part_type.bytes();
      return g.AddState(s->name, part_type);
    };
    ir::Value* part = split(table);
    for (ir::Op* lookup : t.lookups) {
      g.SetInsertionPoint(lookup);
      ir::Value* ids = lookup->input(1);
      const int64_t n = NumElements(ids->shape());
      ir::Op* rows_op = g.AddOp(
          "gather_rows", {part, g.Add1("reshape", {ids}, {{"shape", Shape{n}}})},
          {{"vocabs", std::vector<int64_t>{vocab}},
           {"padding_rows", std::vector<int64_t>{ir::ReadTablePart(*lookup, vocab).padding_row}},
           {"parts", parts},
           {"rank", int64_t{o.rank}}},
          lookup->name);
      lookups.push_back(rows_op);
      g.ReplaceAllUses(lookup->output(0), g.Add1("reshape", {rows_op->output(0)},
                                                 {{"shape", lookup->output(0)->shape()}}));
    }
    if (!t.update) continue;
    ir::Op* op = t.update;
    g.SetInsertionPoint(op);
    std::vector<ir::Value*> inputs = op->inputs;
    inputs[0] = part;
    ir::AttrMap attrs = op->attrs;
    if (ir::IsRowOptimizerOp(op->type)) {
      attrs.Set("table_rows", vocab);
      attrs.Set("row_begin", rows.begin);
      Exchange(g, op, &inputs.back(), &inputs[1], vocab, o, &exchanges);
    } else {
      // The part's rows of the dense gradient.
      ir::RowGradient r = *ir::AsRowGradient(op->input(1));
      Exchange(g, op, &r.ids, &r.rows, vocab, o, &exchanges);
      inputs[1] = g.Add1(
          "embedding_grad", {r.ids, r.rows},
          {{"rows", rows.size()}, {"padding_idx", r.padding_idx}, {"row_begin", rows.begin}});
    }
    for (const auto& [i, k] : t.states) inputs[i] = split(op->input(i));
    ir::Op* updated = g.AddOp(op->type, inputs, attrs, op->name + " (rows split)");
    g.SetStateUpdate(part, updated->output(0));
    RebindOptimizerStates(g, *op, *updated, inputs);
  }
  g.SetInsertionPoint(nullptr);
  MergeCollectives(g, lookups, {"vocabs", "padding_rows"}, "lookups");
  MergeCollectives(g, exchanges, {"vocabs", "scales"}, "row gradients");
  for (ir::Value* s : replaced) g.RemoveState(s);
  g.RemoveDeadCode();
  *detail = fmt::format(
      "{} embedding tables split by rows over {} replicas (this is part {}): {} state tensors, "
      "{:.3f} MB -> {:.3f} MB",
      tables.size(), o.replicas, o.rank, replaced.size(), whole_bytes / 1e6, part_bytes / 1e6);
  for (const auto& [why, count] : kept) *detail += fmt::format("; kept whole: {} x{}", why, count);
  return static_cast<int>(tables.size());
}

}  // namespace tiller::passes
