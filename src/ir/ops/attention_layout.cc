// ir/ops/attention_layout.h.
#include "ir/ops/attention_layout.h"

#include "ir/graph.h"

namespace tiller::ir {

AttentionLayout AttentionLayoutOf(const Op& op) {
  AttentionLayout g;
  const Shape &q = op.inputs[0]->shape(), &k = op.inputs[1]->shape(), &v = op.inputs[2]->shape();
  g.batch = q[0];
  g.sq = q[1];
  g.sk = k[1];
  g.heads = op.GetInt("heads");
  g.q_ld = q[2];
  g.k_ld = k[2];
  g.v_ld = v[2];
  const std::vector<int64_t>& offsets = op.GetInts("offsets");
  if (offsets.empty()) {
    g.d = q[2] / g.heads;
    g.dv = v[2] / g.heads;
  } else {
    g.d = g.dv = op.GetInt("head_dim");
    g.q_off = offsets[0];
    g.k_off = offsets[1];
    g.v_off = offsets[2];
  }
  g.alpha = static_cast<float>(op.GetFloat("alpha"));
  if (const Value* mask = op.input(3)) {
    g.has_mask = true;
    Shape m = mask->shape();
    m.insert(m.begin(), 4 - m.size(), 1);
    int64_t stride = 1;
    int64_t* out[4] = {&g.mb, &g.mh, &g.mq, &g.mk};
    for (int i = 3; i >= 0; --i) {
      *out[i] = m[i] == 1 ? 0 : stride;
      stride *= m[i];
    }
  }
  return g;
}

}  // namespace tiller::ir
