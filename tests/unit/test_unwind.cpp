// The shim's unwinder (src/shim/unwind.cpp): the frames a deep site keeps are the frames glibc sees, and a
// build that carries its own libunwind uses it and loads no other. And the per-thread cache of deep stacks
// (src/shim/pc_cache.cpp) answers only for the very same frames.
#include "shim/record/call.hpp"
#include "shim/record/pc_cache.hpp"
#include "shim/record/recorder.hpp"
#include "shim/services/unwind.hpp"

#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <execinfo.h>

#include <algorithm>
#include <vector>

namespace {

using cumemaudit::ledger::Pc;
using cumemaudit::ledger::Site;
using cumemaudit::shim::Recorder;

// A stand-in for a wrapper whose Call is made `own` frames below it: how many of the shim's own frames sit
// above the caller differs between paths, and the unwind learns the most it has seen.
__attribute__((noinline)) Site site_below(Recorder& rec, void* caller, int own) {
    if (own > 0) {
        const Site s = site_below(rec, caller, own - 1);
        asm volatile("" ::: "memory");  // keeps this frame: no tail call
        return s;
    }
    cumemaudit::shim::Call call(rec, "cuMemCreate", caller, cumemaudit::shim::CallClass::vmm);
    return call.site();
}

struct WrapperSeen {
    Site site;
    std::vector<Pc> expected;  // glibc's frames from the caller outwards
};

__attribute__((noinline)) WrapperSeen wrapper(Recorder& rec, int own, std::size_t depth) {
    void* const caller = __builtin_return_address(0);
    std::vector<void*> bt(64);
    bt.resize(static_cast<std::size_t>(backtrace(bt.data(), 64)));
    WrapperSeen w{site_below(rec, caller, own), {}};
    const auto at = std::find(bt.begin(), bt.end(), caller);
    for (auto it = at; it != bt.end() && w.expected.size() < depth; ++it) w.expected.push_back(reinterpret_cast<Pc>(*it));
    asm volatile("" ::: "memory");
    return w;
}

__attribute__((noinline)) WrapperSeen deep_wrapper(int depth, Recorder& rec, int own, std::size_t keep) {
    if (depth == 0) return wrapper(rec, own, keep);
    WrapperSeen w = deep_wrapper(depth - 1, rec, own, keep);
    asm volatile("" ::: "memory");
    return w;
}

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

TEST_CASE("a deep stack seen again interns to the same trace without growing the tree; one frame apart is another") {
    using cumemaudit::ledger::Pc;
    cumemaudit::shim::Recorder rec{cumemaudit::options::Options{}, 1};
    auto& tree = rec.ledger().traces();
    // Three stacks through one return address (0x1000), as a VMM wrapper is reached from different paths.
    const std::vector<Pc> a = {0x1000, 0x2000, 0x3000, 0x4000}, b = {0x1000, 0x2000, 0x3100, 0x4000},
                          shorter = {0x1000, 0x2000, 0x3000};
    const auto site_a = cumemaudit::shim::deep_site(rec, "cuMemCreate", a, a.size());
    const std::size_t nodes = tree.size();
    CHECK(nodes == 4);
    const auto again = cumemaudit::shim::deep_site(rec, "cuMemMap", a, a.size());
    CHECK(again.trace == site_a.trace);
    CHECK(std::string(again.api) == "cuMemMap");
    CHECK(tree.size() == nodes);
    const auto site_b = cumemaudit::shim::deep_site(rec, "cuMemCreate", b, b.size());
    const auto site_short = cumemaudit::shim::deep_site(rec, "cuMemCreate", shorter, shorter.size());
    CHECK(site_b.trace != site_a.trace);
    CHECK(site_short.trace != site_a.trace);
    CHECK(tree.frames(site_b.trace) == b);
    CHECK(tree.frames(site_short.trace) == shorter);
    SECTION("a fresh recorder (a fork child's) does not take the cached ids of another") {
        cumemaudit::shim::Recorder child{cumemaudit::options::Options{}, 2};
        const auto in_child = cumemaudit::shim::deep_site(child, "cuMemCreate", a, a.size());
        CHECK(child.ledger().traces().size() == 4);
        CHECK(child.ledger().traces().frames(in_child.trace) == a);
    }
}

TEST_CASE("a deep site keeps the caller's frames and the next ones, however many of the shim's frames are above") {
    cumemaudit::options::Options o;
    o.python_frames = cumemaudit::options::PythonFrames::none;
    Recorder rec{o, 1};
    const std::size_t depth = static_cast<std::size_t>(o.vmm_stack_depth);
    // A few own frames, then more than seen so far (the walk is made again with room), then a few again.
    for (const int own : {0, 2, 1, 0}) {
        const WrapperSeen w = deep_wrapper(30, rec, own, depth);
        INFO("own frames below the wrapper: " << own);
        REQUIRE(w.expected.size() == depth);
        CHECK(rec.ledger().traces().frames(w.site.trace) == w.expected);
    }
}
