// trace_tree: stacks interned once, as heaptrack does. A stack is a path of return addresses from the
// outermost captured frame to the innermost; each distinct (parent, pc) pair is one node, and a TraceId
// names the node of the innermost frame. Recording a site is then one lookup per frame and four bytes per
// reference, and stacks are symbolized only when a report is written.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace cumemaudit::ledger {

using Pc = std::uintptr_t;
using TraceId = std::uint32_t;  // 0 is the empty trace

class TraceTree {
public:
    TraceTree();
    ~TraceTree();

    // pcs[0] is the innermost frame (the caller of the intercepted API), as backtrace() returns them.
    // Thread-safe; sharded, so threads interning different stacks rarely meet on a lock.
    TraceId intern(std::span<const Pc> pcs);

    // Innermost first, the same order intern() took.
    std::vector<Pc> frames(TraceId) const;

    std::size_t size() const;  // nodes, for the benchmark of memory per allocation
    void reset();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace cumemaudit::ledger
