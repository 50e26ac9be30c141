// The shim's unwinder (src/shim/unwind.cpp): the frames a deep site keeps are the frames glibc sees, and a
// build that carries its own libunwind uses it and loads no other.
#include "shim/unwind.hpp"

#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <execinfo.h>

#include <vector>

namespace {

struct Seen {
    std::vector<void*> ours, glibc;
};

// Both captures from the same frame, so every frame above it is the same return address.
__attribute__((noinline)) void capture(Seen& s) {
    s.ours.resize(64);
    s.glibc.resize(64);
    s.ours.resize(static_cast<std::size_t>(cumemaudit::shim::unwind(s.ours.data(), 64)));
    s.glibc.resize(static_cast<std::size_t>(backtrace(s.glibc.data(), 64)));
}

__attribute__((noinline)) void deep(int depth, Seen& s) {
    if (depth == 0) return capture(s);
    deep(depth - 1, s);
    asm volatile("" ::: "memory");  // keeps this frame: no tail call
}

}  // namespace

TEST_CASE("a 40-frame stack unwinds to the return addresses glibc's backtrace() finds, cached or not") {
    // The second walk of the same stack is served from libunwind's per-thread cache. One call site for
    // both (a loop the compiler cannot unroll), so even the test's own frame is the same.
    Seen walks[2];
    volatile int n = 2;
    for (int i = 0; i < n; ++i) deep(40, walks[i]);
    const Seen &first = walks[0], &again = walks[1];
    REQUIRE(first.ours.size() >= 42);  // 40 of deep(), capture(), the test: more above, up to main
    REQUIRE(first.ours.size() == first.glibc.size());
    // Frame 0 is inside each unwinder's own caller, at different instructions; every frame above is shared.
    for (std::size_t i = 1; i < first.ours.size(); ++i) {
        INFO("frame " << i);
        CHECK(first.ours[i] == first.glibc[i]);
    }
    CHECK(again.ours == first.ours);
}

TEST_CASE("a build with libunwind inside uses it and loads no libunwind.so.8") {
#if CUMEMAUDIT_STATIC_LIBUNWIND
    Seen s;
    deep(3, s);
    REQUIRE(!s.ours.empty());
    CHECK(dlopen("libunwind.so.8", RTLD_NOW | RTLD_NOLOAD) == nullptr);
#else
    WARN("this build has no static libunwind (scripts/libunwind): nothing to check");
#endif
}
