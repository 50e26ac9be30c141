// The ledger's lock: the thread that takes it kClaimStreak times in a row owns it and takes it with no
// locked instruction, another thread now and then (a report, a mark) leaves it so, threads that take it
// often end the bias; in every case a figure changed under it by several threads at once comes out exact.
#include "ledger/spin_lock.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>
#include <vector>

using cumemaudit::ledger::detail::SpinLock;

namespace {

// Changed under the lock only: plain, so a lost exclusion shows as a wrong total.
struct Guarded {
    SpinLock lock;
    long count = 0;
    // hold: how long the read and the write stay apart, so that a thread let in by mistake meanwhile
    // loses its increments.
    void add(long times, std::chrono::microseconds hold = std::chrono::microseconds(0)) {
        for (long i = 0; i < times; ++i) {
            lock.lock();
            const long seen = count;
            std::atomic_signal_fence(std::memory_order_seq_cst);
            for (auto until = std::chrono::steady_clock::now() + hold; std::chrono::steady_clock::now() < until;) {
            }
            count = seen + 1;
            lock.unlock();
        }
    }
};

}  // namespace

TEST_CASE("a thread that takes the lock often enough owns it and keeps it biased") {
    Guarded g;
    g.add(SpinLock::kClaimStreak - 1);
    CHECK_FALSE(g.lock.biased());
    g.add(1000);
    CHECK(g.count == SpinLock::kClaimStreak - 1 + 1000);
    CHECK(g.lock.biased());  // on a kernel without membarrier this fails: it would say so
}

TEST_CASE("another thread now and then: the owner stays biased and nothing is lost") {
    Guarded g;
    g.add(SpinLock::kClaimStreak);  // this thread owns it
    REQUIRE(g.lock.biased());
    const long others = SpinLock::kVisitsPerSecond / 2;
    // Both hold it a while, so that one let in while the other is inside loses increments.
    std::thread other([&] { g.add(others, std::chrono::microseconds(50)); });
    g.add(50000, std::chrono::microseconds(1));
    other.join();
    CHECK(g.count == SpinLock::kClaimStreak + others + 50000);
    CHECK(g.lock.biased());
}

TEST_CASE("a walk inside one Visit counts once: the owner stays biased, and nothing is lost") {
    Guarded g;
    g.add(SpinLock::kClaimStreak);
    REQUIRE(g.lock.biased());
    std::thread walker([&] {
        for (int walk = 0; walk < SpinLock::kVisitsPerSecond / 2; ++walk) {
            SpinLock::Visit visit(g.lock);
            g.add(64, std::chrono::microseconds(20));  // a report's walk, shard by shard
        }
    });
    g.add(50000, std::chrono::microseconds(1));
    walker.join();
    CHECK(g.count == SpinLock::kClaimStreak + SpinLock::kVisitsPerSecond / 2 * 64 + 50000);
    CHECK(g.lock.biased());
    {
        SpinLock::Visit own(g.lock);  // the owner's own visit is nothing
        g.add(10);
    }
    CHECK(g.count == SpinLock::kClaimStreak + SpinLock::kVisitsPerSecond / 2 * 64 + 50010);
    CHECK(g.lock.biased());
}

TEST_CASE("threads that take it often end the bias, and the total stays exact") {
    Guarded g;
    g.add(SpinLock::kClaimStreak);
    REQUIRE(g.lock.biased());
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) threads.emplace_back([&] { g.add(100000); });
    g.add(100000);
    for (std::thread& t : threads) t.join();
    CHECK(g.count == SpinLock::kClaimStreak + 4 * 100000);
    CHECK_FALSE(g.lock.biased());
    g.add(1000);  // the former owner takes the exchange lock like any thread, for good
    CHECK(g.count == SpinLock::kClaimStreak + 4 * 100000 + 1000);
    CHECK_FALSE(g.lock.biased());
}

TEST_CASE("threads taking turns from the start: nobody owns it, nothing is lost") {
    Guarded g;
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) threads.emplace_back([&] { g.add(200000, std::chrono::microseconds(0)); });
    for (std::thread& t : threads) t.join();
    CHECK(g.count == 2 * 200000);
}
