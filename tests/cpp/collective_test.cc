// The in-process collective (backend/collective.h): sums in rank order with
// identical bytes on every rank, in place or not, and an aborted rank wakes
// the others instead of leaving them waiting.
#include "backend/collective.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/error.h"
#include "core/shape.h"

namespace tiller {
namespace {

TEST(InProcessCollective, AllReduceSumGivesEveryRankTheSameSumInPlaceOrNot) {
  constexpr int kRanks = 3;
  // Not a multiple of the ranks (uneven slices), and several of the sum's
  // blocks per slice, the last one partial.
  constexpr int64_t kCount = 40001;
  auto group = backend::MakeInProcessCollective(kRanks);
  std::vector<std::vector<float>> in(kRanks), out(kRanks);
  std::vector<std::vector<double>> in_place(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    for (int64_t i = 0; i < kCount; ++i) {
      in[r].push_back(0.1f * static_cast<float>(r + 1) + static_cast<float>(i));
      in_place[r].push_back(1.0 / (r + 1) + static_cast<double>(i));
    }
    out[r].assign(kCount, -1.0f);
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      // Several calls back to back: a fast rank must not overtake a slow one.
      for (int repeat = 0; repeat < 3; ++repeat)
        group->AllReduceSum(r, in[r].data(), out[r].data(), kCount, DType::kF32);
      group->AllReduceSum(r, in_place[r].data(), in_place[r].data(), kCount, DType::kF64);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int64_t i = 0; i < kCount; ++i) {
    float want = in[0][i];
    for (int r = 1; r < kRanks; ++r) want += in[r][i];  // rank order
    double want_d = 1.0 + static_cast<double>(i);
    want_d += 0.5 + static_cast<double>(i);
    want_d += 1.0 / 3 + static_cast<double>(i);
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_EQ(out[r][i], want) << "rank " << r << " element " << i;
      ASSERT_EQ(in_place[r][i], want_d) << "rank " << r << " element " << i;
    }
  }
}

// Many small in-place calls back to back, each rank's buffer rewritten
// between them: a waiter that leaves the barrier early (the spinning path
// when the ranks fit the CPUs, the sleeping one when they do not) would read
// a peer's old or half-written values.
TEST(InProcessCollective, BackToBackSmallCallsSeeEveryRanksLatestValues) {
  for (int ranks : {2, 5}) {
    auto group = backend::MakeInProcessCollective(ranks);
    constexpr int kRounds = 2000;
    constexpr int64_t kCount = 33;
    std::vector<int> wrong(ranks, 0);
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        std::vector<float> buffer(kCount);
        for (int round = 0; round < kRounds; ++round) {
          for (int64_t i = 0; i < kCount; ++i)
            buffer[i] = static_cast<float>(round * 8 + r + static_cast<int>(i));
          group->AllReduceSum(r, buffer.data(), buffer.data(), kCount, DType::kF32);
          for (int64_t i = 0; i < kCount; ++i) {
            float want = 0;
            for (int q = 0; q < ranks; ++q)
              want += static_cast<float>(round * 8 + q + static_cast<int>(i));
            if (buffer[i] != want) ++wrong[r];
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < ranks; ++r)
      EXPECT_EQ(wrong[r], 0) << "rank " << r << " of " << ranks << " read stale sums";
  }
}

TEST(InProcessCollective, ReduceScatterGivesEachRankItsPartOfTheAllReduceAndAllGatherJoinsThem) {
  constexpr int kRanks = 3;
  constexpr int64_t kCount = 40001;  // parts of 13333, 13333 and 13335 elements
  auto group = backend::MakeInProcessCollective(kRanks);
  std::vector<std::vector<float>> in(kRanks), reduced(kRanks), part(kRanks), gathered(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    for (int64_t i = 0; i < kCount; ++i)
      in[r].push_back(0.1f * static_cast<float>(r + 1) + static_cast<float>(i) / 7);
    reduced[r].assign(kCount, -1.0f);
    part[r].assign(PartOf(kCount, kRanks, r).size(), -1.0f);
    gathered[r].assign(kCount, -1.0f);
  }
  // Broadcast from rank 1 into the others' buffers.
  const std::vector<double> root = {1, 2, 3, 4, 5};
  std::vector<std::vector<double>> cast(kRanks, std::vector<double>(5, 0.0));
  cast[1] = root;
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      group->AllReduceSum(r, in[r].data(), reduced[r].data(), kCount, DType::kF32, 0.25);
      group->ReduceScatterSum(r, in[r].data(), part[r].data(), kCount, DType::kF32, 0.25);
      group->AllGather(r, part[r].data(), gathered[r].data(), kCount, DType::kF32);
      group->Broadcast(r, 1, cast[r].data(), 5 * sizeof(double));
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    const PartRange p = PartOf(kCount, kRanks, r);
    for (int64_t i = p.begin; i < p.end; ++i)
      ASSERT_EQ(part[r][i - p.begin], reduced[r][i]) << "rank " << r << " element " << i;
    // The parts joined again: every rank holds the all-reduce's bytes.
    ASSERT_EQ(gathered[r], reduced[0]) << "rank " << r;
    EXPECT_EQ(cast[r], root) << "rank " << r;
  }
}

// Two tables split by rows over 3 ranks (uneven parts), each rank looking
// up ids of its own: every row is the whole table's, the padding row and
// ids outside the table zeros. In process (ranks read each other's parts)
// and by the default every other group uses (gathered ids, rows looked up
// by their owner, reduce-scattered back): the same bytes.
TEST(InProcessCollective, GatherRowsGivesEachRankItsIdsRowsWhicheverRankHoldsThem) {
  constexpr int kRanks = 3;
  struct Table {
    int64_t vocab, width, padding;
    std::vector<float> whole;
  };
  std::vector<Table> tables = {{10, 16, 4, {}}, {7, 5, -1, {}}};  // 64-byte rows and 20
  for (size_t t = 0; t < tables.size(); ++t)
    for (int64_t i = 0; i < tables[t].vocab * tables[t].width; ++i)
      tables[t].whole.push_back(static_cast<float>(t * 1000 + i) + 0.5f);
  // Rank r's ids: of every part, the padding row, and outside the table.
  std::vector<std::vector<int64_t>> ids64 = {
      {0, 9, 4, 3, 10, 5}, {6, 6, -1, 2, 7, 8}, {1, 4, 9, 0, 3, 3}};
  std::vector<std::vector<int32_t>> ids32 = {{0, 6, 3}, {2, 5, 7}, {4, 1, 1}};
  for (bool generic : {false, true}) {
    auto group = backend::MakeInProcessCollective(kRanks);
    std::vector<std::vector<std::vector<float>>> out(kRanks);
    std::vector<std::vector<backend::RowLookup>> lookups(kRanks);
    std::vector<std::vector<std::byte>> workspace(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      for (size_t t = 0; t < tables.size(); ++t) {
        const Table& tb = tables[t];
        const PartRange part = PartOf(tb.vocab, kRanks, r);
        backend::RowLookup l;
        l.part = tb.whole.data() + part.begin * tb.width;
        l.ids64 = t == 0;
        l.ids = t == 0 ? static_cast<const void*>(ids64[r].data()) : ids32[r].data();
        l.n = t == 0 ? 6 : 3;
        l.vocab = tb.vocab;
        l.padding_row = tb.padding;
        l.row_bytes = static_cast<size_t>(tb.width) * sizeof(float);
        out[r].emplace_back(static_cast<size_t>(l.n * tb.width), -7.0f);
        l.out = out[r].back().data();
        lookups[r].push_back(l);
      }
      workspace[r].resize(group->GatherRowsWorkspace(lookups[r]));
    }
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r)
      threads.emplace_back([&, r] {
        for (int repeat = 0; repeat < 2; ++repeat) {
          if (generic)
            group->backend::Collective::GatherRows(r, lookups[r], workspace[r].data());
          else
            group->GatherRows(r, lookups[r], workspace[r].data());
        }
      });
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < kRanks; ++r)
      for (size_t t = 0; t < tables.size(); ++t) {
        const Table& tb = tables[t];
        for (int64_t i = 0; i < lookups[r][t].n; ++i) {
          const int64_t id = t == 0 ? ids64[r][i] : ids32[r][i];
          for (int64_t j = 0; j < tb.width; ++j) {
            const float want = id < 0 || id >= tb.vocab || id == tb.padding
                                   ? 0.0f
                                   : tb.whole[static_cast<size_t>(id * tb.width + j)];
            ASSERT_EQ(out[r][t][static_cast<size_t>(i * tb.width + j)], want)
                << (generic ? "default" : "in process") << " rank " << r << " table " << t << " id "
                << id;
          }
        }
      }
  }
}

// Row gradients of two tables split by rows over 3 ranks: each rank gets
// every rank's (id, row) pairs of its own rows, in rank order and then in
// order (repeats kept), the rest padded with another part's id and zero
// rows. In process and by the default: the same bytes.
TEST(InProcessCollective, ExchangeRowsGivesEachRankItsRowsPairsFromEveryRank) {
  constexpr int kRanks = 3;
  const std::vector<int64_t> vocabs = {10, 7}, widths = {16, 3};
  std::vector<std::vector<int64_t>> ids64 = {
      {0, 9, 4, 3, 4, 5}, {6, 6, 2, 2, 7, 8}, {1, 4, 9, 0, 3, 3}};
  std::vector<std::vector<int32_t>> ids32 = {{0, 6, 3}, {2, 5, 6}, {4, 1, 1}};
  auto rows_of = [&](size_t t, int r) {
    const int64_t n = t == 0 ? 6 : 3;
    std::vector<float> rows;
    for (int64_t i = 0; i < n * widths[t]; ++i)
      rows.push_back(static_cast<float>(t * 1000 + r * 100 + i) + 0.25f);
    return rows;
  };
  for (bool generic : {false, true}) {
    auto group = backend::MakeInProcessCollective(kRanks);
    std::vector<std::vector<std::vector<float>>> rows(kRanks), out_rows(kRanks);
    std::vector<std::vector<int64_t>> out64(kRanks);
    std::vector<std::vector<int32_t>> out32(kRanks);
    std::vector<std::vector<backend::RowGradientPart>> parts(kRanks);
    std::vector<std::vector<std::byte>> workspace(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      out64[r].assign(6 * kRanks, -5);
      out32[r].assign(3 * kRanks, -5);
      for (size_t t = 0; t < 2; ++t) {
        rows[r].push_back(rows_of(t, r));
        const int64_t n = t == 0 ? 6 : 3;
        out_rows[r].emplace_back(static_cast<size_t>(n * kRanks * widths[t]), -9.0f);
        backend::RowGradientPart p;
        p.ids64 = t == 0;
        p.ids = t == 0 ? static_cast<const void*>(ids64[r].data()) : ids32[r].data();
        p.rows = rows[r][t].data();
        p.n = n;
        p.vocab = vocabs[t];
        p.row_bytes = static_cast<size_t>(widths[t]) * sizeof(float);
        p.out_ids = t == 0 ? static_cast<void*>(out64[r].data()) : out32[r].data();
        p.out_rows = out_rows[r][t].data();
        parts[r].push_back(p);
      }
      workspace[r].resize(group->ExchangeRowsWorkspace(parts[r]));
    }
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r)
      threads.emplace_back([&, r] {
        if (generic)
          group->backend::Collective::ExchangeRows(r, parts[r], workspace[r].data());
        else
          group->ExchangeRows(r, parts[r], workspace[r].data());
      });
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < kRanks; ++r)
      for (size_t t = 0; t < 2; ++t) {
        const PartRange own = PartOf(vocabs[t], kRanks, r);
        const int64_t n = t == 0 ? 6 : 3, w = widths[t];
        std::vector<int64_t> want_ids;
        std::vector<float> want_rows;
        for (int from = 0; from < kRanks; ++from) {
          const std::vector<float> src = rows_of(t, from);
          for (int64_t i = 0; i < n; ++i) {
            const int64_t id = t == 0 ? ids64[from][i] : ids32[from][i];
            if (id < own.begin || id >= own.end) continue;
            want_ids.push_back(id);
            want_rows.insert(want_rows.end(), src.begin() + i * w, src.begin() + (i + 1) * w);
          }
        }
        const std::string what =
            fmt::format("{} rank {} table {}", generic ? "default" : "in process", r, t);
        for (int64_t i = 0; i < n * kRanks; ++i) {
          const int64_t got = t == 0 ? out64[r][i] : out32[r][i];
          if (i < static_cast<int64_t>(want_ids.size())) {
            ASSERT_EQ(got, want_ids[i]) << what << " slot " << i;
          } else {
            ASSERT_TRUE(got >= 0 && got < vocabs[t] && (got < own.begin || got >= own.end))
                << what << " pad " << got;
          }
          for (int64_t j = 0; j < w; ++j) {
            const float want = i < static_cast<int64_t>(want_ids.size())
                                   ? want_rows[static_cast<size_t>(i * w + j)]
                                   : 0.0f;
            ASSERT_EQ(out_rows[r][t][static_cast<size_t>(i * w + j)], want) << what;
          }
        }
      }
  }
}

TEST(InProcessCollective, AbortWakesTheRanksWaitingAndResetMakesItUsable) {
  auto group = backend::MakeInProcessCollective(2);
  float x = 1, y = 2;
  std::string seen;
  std::thread waiting([&] {
    try {
      group->AllReduceSum(0, &x, &x, 1, DType::kF32);  // rank 1 never comes
    } catch (const Error& e) {
      seen = e.what();
    }
  });
  group->Abort("replica 1 failed");
  waiting.join();
  EXPECT_EQ(seen, "replica 1 failed");
  EXPECT_THROW(group->AllReduceSum(1, &y, &y, 1, DType::kF32), Error) << "aborted until Reset";
  group->Reset();
  std::thread rank0([&] { group->AllReduceSum(0, &x, &x, 1, DType::kF32); });
  group->AllReduceSum(1, &y, &y, 1, DType::kF32);
  rank0.join();
  EXPECT_EQ(x, 3.0f);
  EXPECT_EQ(y, 3.0f);
}

}  // namespace
}  // namespace tiller
