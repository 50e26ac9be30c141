// capture_budget: the graphs a run captured, and the sizes it did not, predicted from the graphs after the
// first (report/capture_budget.hpp).
#include "report/capture_budget.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>

using namespace cumemaudit::report;

namespace {

constexpr std::uint64_t kMiB = 1 << 20;

Graph graph(std::uint64_t id, std::uint64_t time_ns, std::uint64_t pytorch, std::uint64_t deepep, std::uint64_t graph_memory,
            std::int64_t instantiate) {
    Graph g;
    g.id = id;
    g.time_ns = time_ns;
    g.bytes_by_owner = {{"pytorch", pytorch}};
    if (deepep) g.bytes_by_owner["deepep"] = deepep;
    g.bytes = pytorch + deepep;
    g.graph_memory_bytes = graph_memory;
    g.instantiate_cost_bytes = instantiate;
    return g;
}

}  // namespace

TEST_CASE("each owner and the graph memory fitted on the graphs after the first; instantiations by their median") {
    Report r;
    // The first graph pays 100 MiB of temporaries; the later ones add 1 MiB (pytorch) and 256 KiB (graph memory)
    // per 128 of size; deepep appears in one graph only.
    r.graphs = {graph(1, 10, 132 * kMiB, 0, 8 * kMiB, 4 * kMiB), graph(2, 20, 16 * kMiB, 0, 4 * kMiB, 2 * kMiB),
                graph(3, 30, 8 * kMiB, 6 * kMiB, 2 * kMiB, 3 * kMiB)};
    Step before;
    before.time_ns = 5;
    before.driver_used_bytes = 1024 * kMiB;
    before.driver_total_bytes = 8192 * kMiB;
    Step after = before;
    after.time_ns = 15;  // after the first capture began: not the one before it
    after.driver_used_bytes = 2048 * kMiB;
    r.steps = {before, after};
    const Budget b = capture_budget(r, {4096, 2048, 1024, 512}, 0.5);
    REQUIRE(b.rows.size() == 4);
    CHECK(b.rows[3].measured == false);
    CHECK(b.rows[3].by_owner.at("pytorch") == 4 * kMiB);       // 8 KiB per unit of size, from graphs 2 and 3
    CHECK(b.rows[3].by_owner.at("graph_memory") == 1 * kMiB);  // 2 KiB per unit
    // deepep: 6 MiB at 1024 and nothing at 2048: (2048·0 + 1024·6 MiB) / (2048² + 1024²) per unit, rounded
    CHECK(b.rows[3].by_owner.at("deepep") == std::llround(512.0 * 1024 * 6 * kMiB / (2048.0 * 2048 + 1024 * 1024)));
    CHECK(b.instantiate_median_bytes == 3 * kMiB);
    CHECK(b.rows[3].instantiate_bytes == 3 * kMiB);
    CHECK(b.measured_bytes == 132 * kMiB + 8 * kMiB + 4 * kMiB + 16 * kMiB + 4 * kMiB + 2 * kMiB + 8 * kMiB + 6 * kMiB + 2 * kMiB + 3 * kMiB);
    CHECK(b.total_bytes == b.measured_bytes + b.rows[3].total_bytes);
    REQUIRE(b.used_before_bytes);
    CHECK(*b.used_before_bytes == 1024 * kMiB);
    CHECK(*b.left_bytes == 4096 * static_cast<std::int64_t>(kMiB) - 1024 * static_cast<std::int64_t>(kMiB) - b.total_bytes);
    const std::string text = budget_text(b);
    CHECK(text.find("Capture budget: 3 of 4 sizes captured in the run, 1 predicted\n") == 0);
    CHECK(text.find("  fit: pytorch 8.0 KiB per unit of size, from graphs 2, 3\n") != std::string::npos);
    CHECK(text.find("  fit: graph memory 2.0 KiB per unit of size, from graphs 2, 3\n") != std::string::npos);
}

TEST_CASE("one graph: the line runs through it, said to be an upper bound; no mark before it, no memory left") {
    Report r;
    r.graphs = {graph(7, 10, 64 * kMiB, 0, 0, 0)};
    const Budget b = capture_budget(r, {4096, 1024}, 0.9);
    CHECK(b.rows[1].by_owner.at("pytorch") == 16 * kMiB);
    CHECK_FALSE(b.left_bytes);
    const std::string text = budget_text(b);
    CHECK(text.find("from graph 7 (one graph: it paid for the pool, so this is an upper bound)") != std::string::npos);
    CHECK(text.find("The memory left is not known: mark a step before the first capture") != std::string::npos);
}

TEST_CASE("no graphs, or more graphs than sizes, is refused with the reason") {
    Report r;
    CHECK_THROWS_WITH(capture_budget(r, {8}, 0.9), Catch::Contains("the report has no CUDA graphs"));
    r.graphs = {graph(1, 1, kMiB, 0, 0, 0), graph(2, 2, kMiB, 0, 0, 0)};
    CHECK_THROWS_WITH(capture_budget(r, {8}, 0.9), Catch::Contains("the report has 2 graphs but --sizes names 1 sizes"));
}

TEST_CASE("PyTorch's predicted bytes first fill the graph pools' free blocks; small requests take 2 MiB segments") {
    // The H100 run of tests/gpu/capture_replay.py --window --sizes 4096,3072,2048,1536 (2026-12-05): what each
    // graph added, and the graph pool's 32 MiB left free after them. Capturing all 16 sizes measured 154 MiB.
    Report r;
    r.graphs = {graph(1, 10, 96 * kMiB, 0, 0, 0), graph(2, 20, 24 * kMiB, 0, 0, 0), graph(3, 30, 16 * kMiB, 0, 0, 0),
                graph(4, 40, 12 * kMiB, 0, 0, 0)};
    r.capture_profile = {CaptureHole{"capture_replay.py:34 (model_step)", "graph (0, 1)", 13, 312 * kMiB, 32 * kMiB, 32 * kMiB, 4},
                         CaptureHole{"capture_replay.py:30 (combine)", "default", 2, 64 * kMiB, 32 * kMiB, 2 * kMiB, 1}};
    const Budget b = capture_budget(r, {4096, 3072, 2048, 1536, 1024, 768, 512, 384, 256, 192, 128, 96, 64, 32, 16, 8}, 0.9);
    REQUIRE(b.pool_free_bytes);
    CHECK(*b.pool_free_bytes == 32 * kMiB);  // the graph pool's rows only
    // 8 KiB per unit of size: 1024..192 ask 8, 6, 4, 3, 2 and 1.5 MiB, all cut from the free 32 MiB.
    for (std::size_t i = 4; i < 10; ++i) {
        CHECK(b.rows[i].by_owner.at("pytorch") == 0);
        CHECK(b.rows[i].from_pool_bytes == static_cast<std::int64_t>(b.rows[i].size * 8 * 1024));
    }
    CHECK(b.from_pool_bytes == (1024 + 768 + 512 + 384 + 256 + 192) * 8 * 1024);
    // 128 asks 1 MiB: a small request, a first 2 MiB segment; 96 (768 KiB) fits in it; 64 opens a second.
    CHECK(b.rows[10].by_owner.at("pytorch") == 2 * kMiB);
    CHECK(b.rows[11].by_owner.at("pytorch") == 0);
    CHECK(b.rows[12].by_owner.at("pytorch") == 2 * kMiB);
    CHECK(b.rows[13].by_owner.at("pytorch") == 0);
    CHECK(b.predicted_bytes == 4 * kMiB);
    CHECK(b.total_bytes == 152 * kMiB);
    CHECK(budget_text(b).find("  PyTorch's graph pools held 32.0 MiB free after the captured graphs (the capture profile): the "
                              "predicted graphs take 24.5 MiB of it;") != std::string::npos);
}

TEST_CASE("without a capture profile the predicted bytes are the fitted line's") {
    Report r;
    r.graphs = {graph(1, 10, 96 * kMiB, 0, 0, 0), graph(2, 20, 24 * kMiB, 0, 0, 0)};
    const Budget b = capture_budget(r, {4096, 3072, 1024}, 0.9);
    CHECK_FALSE(b.pool_free_bytes);
    CHECK(b.rows[2].by_owner.at("pytorch") == 8 * kMiB);
    CHECK(b.rows[2].from_pool_bytes == 0);
    CHECK(budget_text(b).find("graph pools held") == std::string::npos);
}
