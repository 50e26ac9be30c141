// A job's marks stay bounded whatever its age: the recent ones whole, older ones in windows that keep each
// window's first, last, lowest and highest mark exactly.
#include "history/step_history.hpp"

#include <catch2/catch.hpp>

using cumemaudit::history::Step;
using cumemaudit::history::StepHistory;

namespace {
Step mark(std::uint64_t n, std::uint64_t used) {
    Step s;
    s.step = n;
    s.time_ns = n * 1000;
    s.driver.used = used;
    return s;
}
std::vector<std::uint64_t> numbers(const std::vector<Step>& steps) {
    std::vector<std::uint64_t> out;
    for (const Step& s : steps) out.push_back(s.step);
    return out;
}
}  // namespace

TEST_CASE("the recent marks are whole; older ones fold into windows that keep their extremes") {
    StepHistory h(3, 2);
    for (std::uint64_t n = 1; n <= 10; ++n) h.add(mark(n, n == 3 ? 900 : n == 6 ? 10 : 100));
    CHECK(h.marks() == 10);
    CHECK(numbers(h.recent()) == std::vector<std::uint64_t>{8, 9, 10});
    const auto w = h.windows();
    REQUIRE(w.size() == 2);
    // Steps 1-4 in one window (its width doubled twice), 5-7 in the next.
    CHECK((w[0].first_step == 1 && w[0].last_step == 4 && w[0].marks == 4));
    CHECK((w[1].first_step == 5 && w[1].last_step == 7 && w[1].marks == 3));
    // The peak at step 3 and the trough at step 6 survive, with the windows' ends, in marking order.
    CHECK(numbers(w[0].steps) == std::vector<std::uint64_t>{1, 3, 4});
    CHECK(numbers(w[1].steps) == std::vector<std::uint64_t>{5, 6, 7});
    CHECK(w[0].steps[1].driver.used == 900);
}

TEST_CASE("a long job costs what a short one does") {
    StepHistory h(1000, 256);
    std::uint64_t folded = 0;
    for (std::uint64_t n = 1; n <= 200000; ++n) h.add(mark(n, 1000 + n % 97));
    for (const auto& w : h.windows()) {
        folded += w.marks;
        CHECK(w.steps.size() <= 4);
    }
    CHECK(h.recent().size() == 1000);
    CHECK(h.windows().size() <= 256);
    CHECK(folded == 200000 - 1000);  // every mark is counted, in the recent ones or in a window
    CHECK(h.recent().front().step == 199001);
}

TEST_CASE("no windows: older marks are only counted") {
    StepHistory h(2, 0);
    for (std::uint64_t n = 1; n <= 5; ++n) h.add(mark(n, 1));
    CHECK(h.marks() == 5);
    CHECK(numbers(h.recent()) == std::vector<std::uint64_t>{4, 5});
    CHECK(h.windows().empty());
}
