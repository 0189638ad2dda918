// einsum{equation}: products of operands summed over the labels the output
// does not keep, as reductions, transposes, reshapes and batched matmuls.
// Operands are contracted left to right, two at a time: labels both hold
// and a later operand or the output needs are batch dims, labels both hold
// and nothing needs are the contraction, the others stay as each operand's
// free dims. Paddle's kernel also reduces a pair to transposes around one
// matmul; results agree with it within float32 rounding (ops_test: 1e-5).
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "frontend/paddle/pir_compat.h"
#include "frontend/paddle/translate.h"
#include "frontend/paddle/translate/helpers.h"

namespace tiller::paddle {
namespace {

// A label is a letter, or a dim of the broadcast ("...") part: those are
// numbered from the right across all operands, so that the last dims
// covered by every operand's "..." share labels. Any label's dims of size 1
// broadcast against the others'.
using Label = int;
constexpr Label kFirstEllipsisLabel = 256;
constexpr Label kEllipsis = kFirstEllipsisLabel - 1;  // "..." in a parsed term

struct Term {
  ir::Value* v;
  std::vector<Label> labels;  // one per dim of v
};

// Splits one side's term into letters and, where "..." appears, kEllipsis.
std::vector<Label> ParseTerm(TranslateContext& ctx, const OpDesc& op, const std::string& term) {
  std::vector<Label> out;
  bool ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    const char ch = term[i];
    if (ch == '.') {
      if (ellipsis || term.compare(i, 3, "...") != 0)
        ctx.Invalid(op, "equation term '{}': '.' only as one '...'", term);
      ellipsis = true;
      out.push_back(kEllipsis);
      i += 2;
    } else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) {
      out.push_back(static_cast<unsigned char>(ch));
    } else {
      ctx.Invalid(op, "equation term '{}': '{}' is not a letter", term, ch);
    }
  }
  return out;
}

// The letters of a parsed term (all of it but a "...").
int64_t LetterCount(const std::vector<Label>& term) {
  return static_cast<int64_t>(
      std::count_if(term.begin(), term.end(), [](Label l) { return l < kEllipsis; }));
}

// The labels of an operand's dims: the "..." place holder expanded into the
// broadcast labels of the dims it covers, `total` of them in all operands.
std::vector<Label> Expand(TranslateContext& ctx, const OpDesc& op, const std::vector<Label>& term,
                          int64_t rank, int64_t total, const std::string& text) {
  const int64_t letters = LetterCount(term);
  const bool ellipsis = static_cast<int64_t>(term.size()) != letters;
  const int64_t covered = rank - letters;
  if (covered < 0 || (!ellipsis && covered != 0))
    ctx.Invalid(op, "equation term '{}' names {} dims of an operand of rank {}", text, letters,
                rank);
  std::vector<Label> out;
  for (Label l : term) {
    if (l != kEllipsis) {
      out.push_back(l);
      continue;
    }
    for (int64_t j = 0; j < covered; ++j)
      out.push_back(kFirstEllipsisLabel + static_cast<Label>(total - covered + j));
  }
  return out;
}

std::string LabelName(Label l) {
  return l >= kFirstEllipsisLabel ? "..." : std::string(1, static_cast<char>(l));
}

int64_t IndexOf(const std::vector<Label>& labels, Label l) {
  const auto it = std::find(labels.begin(), labels.end(), l);
  return it == labels.end() ? -1 : it - labels.begin();
}

// Sums t over the labels `keep` rejects.
Term SumOut(TranslateContext& ctx, const OpDesc& op, Term t, const auto& keep) {
  std::vector<int64_t> axes;
  std::vector<Label> left;
  for (size_t i = 0; i < t.labels.size(); ++i) {
    if (keep(t.labels[i]))
      left.push_back(t.labels[i]);
    else
      axes.push_back(static_cast<int64_t>(i));
  }
  if (axes.empty()) return t;
  ir::Value* v = ctx.Add1(op, "reduce_sum", {t.v}, {{"axes", axes}, {"keepdim", false}});
  return {v, left};
}

// t's dims in the order of `labels` (a permutation of t's).
ir::Value* Arrange(TranslateContext& ctx, const OpDesc& op, const Term& t,
                   const std::vector<Label>& labels) {
  std::vector<int64_t> perm;
  for (Label l : labels) perm.push_back(IndexOf(t.labels, l));
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity = identity && perm[i] == static_cast<int64_t>(i);
  return identity ? t.v : ctx.Add1(op, "transpose", {t.v}, {{"perm", perm}});
}

int64_t DimOf(const Term& t, Label l) {
  const int64_t i = IndexOf(t.labels, l);
  return i < 0 ? 1 : t.v->shape()[static_cast<size_t>(i)];
}

int64_t Product(const Term& t, const std::vector<Label>& labels) {
  int64_t p = 1;
  for (Label l : labels) p *= DimOf(t, l);
  return p;
}

// a and b contracted over the labels neither `needed` later: one matmul of
// [batch..., M, K] x [batch..., K, N], batch dims broadcasting.
Term Contract(TranslateContext& ctx, const OpDesc& op, Term a, Term b,
              const std::vector<Label>& needed) {
  auto later = [&](Label l) { return IndexOf(needed, l) >= 0; };
  auto in = [](const Term& t, Label l) { return IndexOf(t.labels, l) >= 0; };
  // A shared label one side holds with size 1 (a broadcast dim) that
  // nothing needs later contracts as a sum over the other side's dim: it is
  // summed there first.
  const std::vector<Label> a_labels = a.labels;  // a may lose one below
  for (Label l : a_labels) {
    if (!in(b, l) || later(l) || DimOf(a, l) == DimOf(b, l)) continue;
    Term& big = DimOf(a, l) == 1 ? b : a;
    big = SumOut(ctx, op, big, [l](Label x) { return x != l; });
  }
  std::vector<Label> batch, contracted, free_a, free_b;
  for (Label l : a.labels) {
    if (!in(b, l))
      free_a.push_back(l);
    else if (later(l))
      batch.push_back(l);
    else
      contracted.push_back(l);
  }
  for (Label l : b.labels)
    if (!in(a, l)) free_b.push_back(l);
  // t as [batch..., first, second] (every label here is one of t's).
  auto arranged = [&](const Term& t, const std::vector<Label>& first,
                      const std::vector<Label>& second) {
    std::vector<Label> order = batch;
    order.insert(order.end(), first.begin(), first.end());
    order.insert(order.end(), second.begin(), second.end());
    Shape shape;
    for (Label l : batch) shape.push_back(DimOf(t, l));
    shape.push_back(Product(t, first));
    shape.push_back(Product(t, second));
    return ctx.Reshape(op, Arrange(ctx, op, t, order), shape);
  };
  ir::Value* x = arranged(a, free_a, contracted);  // [batch, M, K]
  ir::Value* y = arranged(b, contracted, free_b);  // [batch, K, N]
  ir::Value* prod =
      ctx.Add1(op, "matmul", {x, y}, {{"transpose_a", false}, {"transpose_b", false}});
  Term out{nullptr, batch};
  Shape shape(prod->shape().begin(), prod->shape().begin() + static_cast<ptrdiff_t>(batch.size()));
  for (Label l : free_a) {
    out.labels.push_back(l);
    shape.push_back(DimOf(a, l));
  }
  for (Label l : free_b) {
    out.labels.push_back(l);
    shape.push_back(DimOf(b, l));
  }
  out.v = ctx.Reshape(op, prod, shape);
  return out;
}

void Einsum(TranslateContext& ctx, const OpDesc& op) {
  std::vector<ir::Value*> operands = ctx.Ins(op, "Operands");
  std::string eq;
  for (char ch : op.attrs.Str("equation", "")) {
    if (ch != ' ') eq += ch;
  }
  if (operands.empty()) ctx.Invalid(op, "no operands");
  const DType dtype = operands[0]->dtype();
  if (dtype != DType::kF32 && dtype != DType::kF64 && dtype != DType::kF16 && dtype != DType::kBF16)
    ctx.Unsupported(op, "{} operands (floating-point ones are)", DTypeName(dtype));
  for (ir::Value* v : operands) {
    if (v->dtype() != dtype)
      ctx.Invalid(op, "operand dtypes differ: {} and {}", DTypeName(dtype), DTypeName(v->dtype()));
  }
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> texts;
  for (size_t at = 0;;) {
    const size_t comma = lhs.find(',', at);
    texts.push_back(lhs.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (texts.size() != operands.size())
    ctx.Invalid(op, "equation '{}' has {} operand terms for {} operands", eq, texts.size(),
                operands.size());
  std::vector<std::vector<Label>> terms;
  int64_t total = 0;  // dims under "..." in the operand that covers most
  for (size_t i = 0; i < texts.size(); ++i) {
    terms.push_back(ParseTerm(ctx, op, texts[i]));
    const int64_t letters = LetterCount(terms[i]);
    if (static_cast<int64_t>(terms[i].size()) != letters)
      total = std::max(total, operands[i]->rank() - letters);
  }
  std::vector<Term> ts;
  std::map<Label, int> count;     // operands holding each label
  std::map<Label, int64_t> size;  // to check that operands agree
  for (size_t i = 0; i < operands.size(); ++i) {
    Term t{operands[i], Expand(ctx, op, terms[i], operands[i]->rank(), total, texts[i])};
    for (size_t d = 0; d < t.labels.size(); ++d) {
      const Label l = t.labels[d];
      if (IndexOf(t.labels, l) != static_cast<int64_t>(d))
        ctx.Unsupported(op, "label '{}' twice in operand {} ('{}'): diagonals are not supported",
                        LabelName(l), i, texts[i]);
      ++count[l];
      const int64_t n = operands[i]->shape()[d];
      auto [it, fresh] = size.emplace(l, n);
      if (!fresh && it->second != n) {
        // A dim of size 1 broadcasts against any size, for letters too:
        // Paddle's API writes "..." as letters over operands unsqueezed to
        // a common rank, so its programs rely on it.
        if (it->second != 1 && n != 1)
          ctx.Invalid(op, "label '{}' is {} in one operand and {} in operand {} ('{}')",
                      LabelName(l), it->second, n, i, texts[i]);
        it->second = std::max(it->second, n);
      }
    }
    ts.push_back(t);
  }
  std::vector<Label> out_labels;
  if (arrow != std::string::npos) {
    const std::string rhs = eq.substr(arrow + 2);
    for (Label l : ParseTerm(ctx, op, rhs)) {
      if (l == kEllipsis) {
        for (int64_t j = 0; j < total; ++j)
          out_labels.push_back(kFirstEllipsisLabel + static_cast<Label>(j));
        continue;
      }
      if (!count.contains(l))
        ctx.Invalid(op, "output label '{}' of '{}' is in no operand", LabelName(l), eq);
      if (IndexOf(out_labels, l) >= 0)
        ctx.Invalid(op, "output label '{}' twice in '{}'", LabelName(l), eq);
      out_labels.push_back(l);
    }
  } else {
    // Implicit output: the "..." dims, then the letters held once, sorted.
    for (int64_t j = 0; j < total; ++j)
      out_labels.push_back(kFirstEllipsisLabel + static_cast<Label>(j));
    for (const auto& [l, n] : count)
      if (l < kFirstEllipsisLabel && n == 1) out_labels.push_back(l);
  }
  // Labels needed after operand i: the output's and those of operands > i.
  auto needed_after = [&](size_t i) {
    std::vector<Label> needed = out_labels;
    for (size_t j = i + 1; j < ts.size(); ++j)
      needed.insert(needed.end(), ts[j].labels.begin(), ts[j].labels.end());
    return needed;
  };
  // A label only one operand holds and nothing else needs is summed there.
  for (size_t i = 0; i < ts.size(); ++i) {
    std::vector<Label> needed = out_labels;
    for (size_t j = 0; j < ts.size(); ++j)
      if (j != i) needed.insert(needed.end(), ts[j].labels.begin(), ts[j].labels.end());
    ts[i] = SumOut(ctx, op, ts[i], [&](Label l) { return IndexOf(needed, l) >= 0; });
  }
  Term acc = ts[0];
  for (size_t i = 1; i < ts.size(); ++i) acc = Contract(ctx, op, acc, ts[i], needed_after(i));
  acc = SumOut(ctx, op, acc, [&](Label l) { return IndexOf(out_labels, l) >= 0; });
  ir::Value* out = Arrange(ctx, op, acc, out_labels);
  // An output that is an operand as it is ("ij->ij") is a copy of it.
  if (out == operands[0])
    out = ctx.Add1(op, "scale", {out}, {{"scale", 1.0}, {"bias", 0.0}, {"bias_after_scale", true}});
  ctx.SetOut(op, "Out", out);
}

const bool kRegistered = [] {
  RegisterTranslator("einsum", Einsum, {"reduce_sum", "transpose", "reshape", "matmul", "scale"});
  return true;
}();

}  // namespace
}  // namespace tiller::paddle
