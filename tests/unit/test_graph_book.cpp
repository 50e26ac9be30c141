// The history's graphs without a driver: what a capture allocated, what instantiating cost and what the
// executables still hold, graph memory committed once until a trim.
#include "history/graph_book.hpp"

#include <catch2/catch.hpp>

using namespace cumemaudit;

namespace {
const void* handle(std::uintptr_t n) { return reinterpret_cast<const void*>(n); }
}  // namespace

TEST_CASE("a capture's allocations, its instantiations and its graph memory land on its row") {
    history::GraphBook book;
    const void* stream = handle(0x10);
    const void* graph = handle(0x20);
    CHECK(book.capture_began(stream, nullptr, 3, 100));
    CHECK(book.is_capturing(stream));
    book.captured(1, 4096);
    book.captured(2, 8192);
    CHECK(book.capture_ended(stream, graph));
    CHECK_FALSE(book.capture_ended(stream, graph));
    CHECK_FALSE(book.is_capturing(stream));
    book.captured(1, 1);  // no capture under way: nobody's
    book.instantiated(graph, handle(0x30), 6 << 20);
    book.instantiated(graph, handle(0x31), 2 << 20);
    book.instantiated(handle(0x99), handle(0x32), 1 << 20);  // built by hand, never captured: not ours
    CHECK(book.awaits_commit(handle(0x30)));
    book.committed(handle(0x30), 64 << 20);
    CHECK_FALSE(book.awaits_commit(handle(0x30)));
    book.trimmed();
    CHECK(book.awaits_commit(handle(0x30)));
    book.exec_destroyed(handle(0x31));
    REQUIRE(book.graphs().size() == 1);
    const history::Graph& g = book.graphs()[0];
    CHECK(g.id == 1);
    CHECK(g.step == 3);
    CHECK(g.allocations == 2);
    CHECK(g.bytes == 12288);
    CHECK(g.bytes_by_owner.at(2) == 8192);
    CHECK(g.instantiations == 2);
    CHECK(g.instantiate_cost_bytes == (8 << 20));
    CHECK(g.held_instantiate_bytes == (6 << 20));
    CHECK(g.graph_memory_bytes == (64u << 20));
}
