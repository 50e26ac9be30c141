#include "oom_text.hpp"

#include "report/human_bytes.hpp"
#include "report/human_numbers.hpp"
#include "report/site_naming.hpp"

#include <fmt/format.h>

namespace cumemaudit::report {

std::string part_label(const OomPart& p, const Oom& o) {
    if (p.what == "graph") return fmt::format("graph {} (instantiate)", p.graph);
    if (p.what == "live") return fmt::format("{} {}", p.owner, p.kind);
    if (p.what == "leaked") {
        std::string s = fmt::format("LEAKED {} {}", p.owner, p.kind);
        if (!p.site.api.empty()) s += " from " + p.site.api;
        if (!p.site.python_frames.empty() || !p.site.frames.empty()) s += " at " + where(p.site);
        return s;
    }
    if (p.what == "held_unmapped") {
        std::string s = fmt::format("{} {} held, never mapped", p.owner, p.kind);
        if (!p.site.api.empty()) s += " from " + p.site.api;
        if (!p.site.python_frames.empty() || !p.site.frames.empty()) s += " at " + where(p.site);
        return s;
    }
    if (p.what == "dma_buf_pinned") {
        std::string s = fmt::format("{} {} freed, kept by an open dma-buf fd", p.owner, p.kind);
        if (!p.site.python_frames.empty() || !p.site.frames.empty()) s += " from " + where(p.site);
        return s;
    }
    if (p.what == "managed_resident") {
        std::string s = "managed memory on the device (touched there; NVML charges it to no process)";
        if (p.prefetched_bytes != 0 && (!p.site.python_frames.empty() || !p.site.frames.empty()))
            s += fmt::format(", {} of it prefetched there by {} at {}", human_bytes(p.prefetched_bytes), p.site.api, where(p.site));
        return s;
    }
    if (p.what == "async_pool_idle") return "async pools, reserved but unused";
    if (p.what == "graph_memory") return "graph memory (committed at graph launches)";
    if (p.what == "context") return "contexts (each one's own reservation, measured at its creation)";
    if (p.what == "local_memory") return "kernel stacks (the stack limit × the threads the device holds)";
    if (p.what == "module_code")
        return "module code and globals (measured at the loads, first gets and first launches that took them)";
    if (p.what == "malloc_heap") return "device heaps (reserved for kernels that call malloc, measured at their first launch)";
    // With NVML's list every other process is a part of its own, so what is left is this process's.
    if (p.what == "unattributed")
        return o.processes_listed ? "unattributed (this process: what no measured call took, a context not measured)"
                                  : "unattributed (what no measured call took, a context not measured, other processes)";
    if (p.what == "other_process") {
        if (p.pid == 0) return "other processes, the smaller ones";
        return p.process.empty() ? fmt::format("other process {}", p.pid) : fmt::format("other process {} ({})", p.pid, p.process);
    }
    return p.what;
}

std::string oom_text(const Oom& o, int max_parts) {
    std::string out;
    auto it = std::back_inserter(out);
    // A call that names no size (a context, a module, a graph instantiation) says none.
    const std::string size = o.requested_bytes == 0 ? ""
                                                     : fmt::format(" of {} bytes ({})", o.requested_bytes, human_bytes(o.requested_bytes));
    fmt::format_to(it, "\nOut of memory: {}{} returned {} at step {}{} [{}]\n", o.api, size, o.result, o.step,
                   o.recovered ? ", recovered by a later retry" : "", o.owner);
    // The place a person names (report/site_naming.hpp): from Python, past the binding and the program's
    // own thin wrapper; the native frame under Python is libffi's or Cython's.
    if (!o.site.python_frames.empty() || !o.site.frames.empty()) fmt::format_to(it, "    at {}\n", where(o.site));
    if (o.kernel_heap_bytes)
        fmt::format_to(it, "  kernel {} calls malloc: its first launch could not reserve its context's device heap (a {} "
                       "CU_LIMIT_MALLOC_HEAP_SIZE, and the driver's own chunk)\n",
                       o.kernel.empty() ? "(name unknown)" : o.kernel, human_bytes(*o.kernel_heap_bytes));
    else if (o.kernel_local_bytes_per_thread)
        fmt::format_to(it, "  kernel {} needs {} of local memory per thread: the kernel stack could not grow to it\n",
                       o.kernel.empty() ? "(name unknown)" : o.kernel, human_bytes(*o.kernel_local_bytes_per_thread));
    // A device has a size: 0 means the driver could not be asked (no context current, as at a first one refused).
    if (o.driver_total_bytes == 0)
        fmt::format_to(it, "  driver: its figures unknown (no context was current to ask); {} leaked (unreachable VMM memory)\n",
                       human_bytes(o.leaked_bytes));
    else
        fmt::format_to(it, "  driver: {} used of {}, {} free; {} of it leaked (unreachable VMM memory)\n",
                       human_bytes(o.driver_used_bytes), human_bytes(o.driver_total_bytes), human_bytes(o.driver_free_bytes),
                       human_bytes(o.leaked_bytes));
    int shown = 0;
    std::uint64_t rest = 0;
    std::size_t rest_parts = 0;
    for (const OomPart& p : o.parts) {
        if (shown == max_parts) {
            rest += p.bytes;
            ++rest_parts;
            continue;
        }
        ++shown;
        const double pct = o.driver_used_bytes ? 100.0 * static_cast<double>(p.bytes) / o.driver_used_bytes : 0.0;
        fmt::format_to(it, "  {:>10} {:5.1f}%  {}\n", human_bytes(p.bytes), pct, part_label(p, o));
    }
    if (rest_parts) fmt::format_to(it, "  {:>10}         ... {} more parts\n", human_bytes(rest), rest_parts);
    if (o.modules_live != 0)
        fmt::format_to(it, "  modules and libraries loaded: {} ({} of images)\n", o.modules_live, human_bytes(o.module_image_bytes));
    // An arena is one allocation (or a few) among the parts: how much of it the framework uses.
    for (const Arena& a : o.arenas)
        fmt::format_to(it, "  arena {}: {} in use of {} it holds (at the last step)\n", a.arena, human_bytes(a.used_bytes),
                       human_bytes(a.reserved_bytes));
    for (const TorchPool& p : o.pytorch_pools) {
        fmt::format_to(it, "  PyTorch pool {}: {} allocated, {} reserved, {} reserved but unallocated", p.pool,
                       human_bytes(p.allocated_bytes), human_bytes(p.reserved_bytes), human_bytes(p.fragmentation_bytes));
        // Whether the free memory could have served the request: held in one block, or spread too thin.
        if (p.free_blocks == 1)
            fmt::format_to(it, " in one free block");
        else if (p.free_blocks != 0)
            fmt::format_to(it, " in {} free blocks, the largest {}", grouped(p.free_blocks), human_bytes(p.largest_free_block_bytes));
        if (p.free_blocks != 0 && o.requested_bytes > p.largest_free_block_bytes)
            fmt::format_to(it, " < {} asked: no free block fits", human_bytes(o.requested_bytes));
        // A pool whose tensors are all gone (a graph freed or never replayed, a MemPool left empty) still holds
        // its segments until emptied: memory no tensor and no other pool can use.
        if (p.allocated_bytes == 0 && p.reserved_bytes != 0) fmt::format_to(it, "; idle: nothing allocated in it");
        out += '\n';
    }
    return out;
}

}  // namespace cumemaudit::report
