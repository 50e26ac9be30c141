// The trace tree: identical stacks intern to one id, shared callers share nodes, frames come back
// innermost first, and concurrent interning agrees.
#include "ledger/trace_tree.hpp"

#include <catch2/catch.hpp>

#include <thread>
#include <vector>

using cumemaudit::ledger::Pc;
using cumemaudit::ledger::TraceId;
using cumemaudit::ledger::TraceTree;

TEST_CASE("trace tree interns stacks and returns frames innermost first") {
    TraceTree t;
    const std::vector<Pc> a{0x10, 0x20, 0x30};
    const std::vector<Pc> b{0x11, 0x20, 0x30};  // same callers, other innermost frame
    const TraceId ia = t.intern(a);
    CHECK(ia != 0);
    CHECK(t.intern(a) == ia);
    const TraceId ib = t.intern(b);
    CHECK(ib != ia);
    CHECK(t.frames(ia) == a);
    CHECK(t.frames(ib) == b);
    CHECK(t.size() == 4);  // 0x30, 0x20 shared; 0x10 and 0x11
    CHECK(t.intern({}) == 0);
    CHECK(t.frames(0).empty());
    t.reset();
    CHECK(t.size() == 0);
}

TEST_CASE("trace tree is consistent under concurrent interning") {
    TraceTree t;
    constexpr int kThreads = 8, kStacks = 500;
    std::vector<std::vector<TraceId>> ids(kThreads, std::vector<TraceId>(kStacks));
    std::vector<std::thread> threads;
    for (int th = 0; th < kThreads; ++th)
        threads.emplace_back([&, th] {
            for (int s = 0; s < kStacks; ++s) {
                const std::vector<Pc> pcs{Pc(0x1000 + s), Pc(0x2000 + s % 7), 0x3000};
                ids[th][s] = t.intern(pcs);
            }
        });
    for (auto& th : threads) th.join();
    for (int s = 0; s < kStacks; ++s) {
        for (int th = 1; th < kThreads; ++th) CHECK(ids[th][s] == ids[0][s]);
        CHECK(t.frames(ids[0][s]) == std::vector<Pc>{Pc(0x1000 + s), Pc(0x2000 + s % 7), 0x3000});
    }
    CHECK(t.size() == 1 + 7 + kStacks);
}
