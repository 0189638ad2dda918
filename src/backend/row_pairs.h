// The (id, row) pairs of exchange_rows (backend/collective.h
// Collective::ExchangeRows): what every implementation keeps of the pairs
// it receives and how it pads the rest, so that all of them give the same
// bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backend/collective.h"
#include "core/shape.h"

namespace tiller::backend {

// One row of row_bytes: the usual widths (16, 32, 64 float32) copied
// inline, as a call to memcpy per 64-byte row costs as much as the copy.
inline void CopyRow(std::byte* dst, const std::byte* src, size_t row_bytes) {
  switch (row_bytes) {
    case 64:
      std::memcpy(dst, src, 64);
      return;
    case 128:
      std::memcpy(dst, src, 128);
      return;
    case 256:
      std::memcpy(dst, src, 256);
      return;
    default:
      std::memcpy(dst, src, row_bytes);
  }
}

// Appends rank r's pairs (ids, float32 rows: n of them) whose id lies in
// `mine` to out_ids / out_rows from slot *count on, the rows times `scale`;
// the outputs hold `capacity` slots. A chunk's kept positions are found
// first without a branch on the id (whose part is as good as random: a
// mispredict per pair otherwise): every position is written to the next
// free entry, which only a kept pair takes. Then only the kept pairs' rows
// are copied. Copying every pair's row to the next free slot, as before,
// read every row, a dropped one too: the exchange of a DLRM step's row
// gradients over two ranks moved a third more bytes, and memory bounds it.
template <typename In, typename I>
inline void KeepPairs(const In* ids, const std::byte* rows, int64_t n, size_t row_bytes,
                      PartRange mine, float scale, I* out_ids, std::byte* out_rows, int64_t* count,
                      int64_t capacity) {
  constexpr int64_t kChunk = 256;
  int64_t kept[kChunk];
  int64_t c = *count;
  const size_t width = row_bytes / sizeof(float);
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t i1 = std::min(n, i0 + kChunk);
    int64_t k = 0;
    for (int64_t i = i0; i < i1; ++i) {
      const auto id = static_cast<int64_t>(ids[i]);
      kept[k] = i;
      k += (id >= mine.begin) & (id < mine.end);
    }
    // Never past the outputs (every slot already taken: not in a valid
    // exchange, whose pairs all fit).
    const int64_t fits = std::max<int64_t>(0, std::min(k, capacity - c));
    for (int64_t q = 0; q < fits; ++q) {
      const int64_t i = kept[q];
      out_ids[c + q] = static_cast<I>(ids[i]);
      std::byte* dst = out_rows + static_cast<size_t>(c + q) * row_bytes;
      const std::byte* src = rows + static_cast<size_t>(i) * row_bytes;
      if (scale == 1.0f) {
        CopyRow(dst, src, row_bytes);
      } else {
        auto* d = reinterpret_cast<float*>(dst);
        const auto* s = reinterpret_cast<const float*>(src);
        // + 0: the scale op's x * s + bias with bias 0, bit for bit.
        for (size_t j = 0; j < width; ++j) d[j] = s[j] * scale + 0.0f;
      }
    }
    c += k;
  }
  *count = c;
}

// Fills slots [count, total) with an id outside `mine` (of another rank's
// rows) and zero rows.
template <typename I>
inline void PadPairs(int64_t count, int64_t total, int64_t vocab, PartRange mine, size_t row_bytes,
                     I* out_ids, std::byte* out_rows) {
  const auto other =
      static_cast<I>(mine.begin > 0 ? mine.begin - 1 : std::min(mine.end, vocab - 1));
  for (int64_t i = count; i < total; ++i) out_ids[i] = other;
  if (total > count)
    std::memset(out_rows + static_cast<size_t>(count) * row_bytes, 0,
                static_cast<size_t>(total - count) * row_bytes);
}

// KeepPairs into p's outputs (whose ids are int64 where p.ids64; n x
// `ranks` slots): the pairs of `ids` (In) and `rows`, n of them, in this
// rank's rows `own`.
template <typename In>
inline void KeepPairsOf(const RowGradientPart& p, int ranks, PartRange own, const In* ids,
                        const std::byte* rows, int64_t n, int64_t* count) {
  auto* out_rows = static_cast<std::byte*>(p.out_rows);
  const int64_t capacity = p.n * ranks;
  if (p.ids64)
    KeepPairs(ids, rows, n, p.row_bytes, own, p.scale, static_cast<int64_t*>(p.out_ids), out_rows,
              count, capacity);
  else
    KeepPairs(ids, rows, n, p.row_bytes, own, p.scale, static_cast<int32_t*>(p.out_ids), out_rows,
              count, capacity);
}

// PadPairs of p's outputs after `count` kept pairs, over `ranks` ranks.
inline void PadPairsOf(const RowGradientPart& p, int ranks, PartRange own, int64_t count) {
  auto* out_rows = static_cast<std::byte*>(p.out_rows);
  if (p.ids64)
    PadPairs(count, p.n * ranks, p.vocab, own, p.row_bytes, static_cast<int64_t*>(p.out_ids),
             out_rows);
  else
    PadPairs(count, p.n * ranks, p.vocab, own, p.row_bytes, static_cast<int32_t*>(p.out_ids),
             out_rows);
}

}  // namespace tiller::backend
