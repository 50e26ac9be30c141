#include "text.hpp"
#include "forecast_text.hpp"

#include "gate.hpp"
#include "graph_cost.hpp"
#include "oom_text.hpp"

#include "common/heap_bytes.hpp"
#include "common/object_roles.hpp"
#include "common/paths.hpp"

#include <fmt/format.h>

namespace cumemaudit::report {
namespace {

// Below a Python caller's frames the native stack is the interpreter, the binding (libffi, ctypes, cffi,
// cuda-python) and libc's start: the Python lines already say where the call came from, so those frames are
// counted, not shown, unless asked for. A C extension's own frame is the program's and stays.
bool carries_python_call(const Frame& f) {
    const std::string_view base = basename(f.object);
    return object_roles::is_python_binding(f.object) || object_roles::passes_on(f.object) ||
           base.starts_with("libc.so") || base.starts_with("ld-linux");
}

void frames(std::string& out, const Site& site, const TextDetail& detail) {
    int p = 0;
    for (const PythonFrame& f : site.python_frames)
        fmt::format_to(std::back_inserter(out), "    py#{} in {} {}:{}\n", p++, f.function, f.file, f.line);
    const bool hide = !detail.native && !site.python_frames.empty();
    std::size_t hidden = 0, shown = 0;
    for (std::size_t i = 0; i < site.frames.size(); ++i) {
        const Frame& f = site.frames[i];
        if (hide && carries_python_call(f)) {
            ++hidden;
            continue;
        }
        if (shown == static_cast<std::size_t>(detail.max_frames)) {
            fmt::format_to(std::back_inserter(out), "    ... {} more frames\n", site.frames.size() - i);
            break;
        }
        ++shown;
        // Numbered by place in the whole stack, so --native's lines read the same numbers.
        fmt::format_to(std::back_inserter(out), "    #{} {:#x} in {}", i, f.pc, f.symbol.empty() ? "??" : f.symbol);
        if (!f.file.empty()) fmt::format_to(std::back_inserter(out), " {}:{}", f.file, f.line);
        if (!f.object.empty()) fmt::format_to(std::back_inserter(out), " ({}+{:#x})", f.object, f.offset);
        out += '\n';
    }
    if (hidden)
        fmt::format_to(std::back_inserter(out), "    ({} interpreter and binding frame{} not shown; cumemaudit report --native "
                                                "shows them)\n",
                       hidden, hidden == 1 ? "" : "s");
    if (site.frames.empty() && site.python_frames.empty()) out += "    (no stack captured)\n";
}

// Whether a row's class fails the gate the report was written under (its echoed fail_on; leaks when absent).
bool fails_gate(const Report& r, const Leak& l) {
    if (is_leak(l)) return true;
    if (l.cls != "unfreed") return false;  // mapped-at-exit: memory in use until exit, never a gate failure
    const auto it = r.options.find("fail_on");
    try {
        return it != r.options.end() && parse_fail_on(it->second).unfreed;
    } catch (const GateError&) {
        return false;
    }
}

// ", device 0", ", host NUMA 1": where a VMM row's memory lives, when its creation said.
std::string where(const Leak& l) { return l.location.empty() ? "" : ", " + l.location; }

}  // namespace

std::string summary_line(const Summary& s) {
    return fmt::format(
        "SUMMARY: cumemaudit: {} bytes leaked in {} allocations ({} references); {} misuse events; {}{}",
        s.leaked_bytes, s.leaked_allocations, s.leaked_references, s.misuse_events, unfreed_phrase(s),
        s.leaked_multicast_objects ? fmt::format("; {} multicast objects never released", s.leaked_multicast_objects) : "");
}

std::string text_summary(const Report& r, const TextDetail& detail) {
    std::string out;
    auto it = std::back_inserter(out);
    fmt::format_to(it, "=={}== cumemaudit: {} (host {}", r.process.pid,
                   r.process.argv.empty() ? std::string("?") : r.process.argv.front(), r.process.host);
    // A rank whose launcher gave no world size is "rank 3", never "rank 3 of -1".
    if (r.process.rank >= 0 && r.process.world_size > 0) fmt::format_to(it, ", rank {} of {}", r.process.rank, r.process.world_size);
    else if (r.process.rank >= 0) fmt::format_to(it, ", rank {}", r.process.rank);
    fmt::format_to(it, "{})\n", r.checkpoint ? ", checkpoint" : "");
    // Only what fails the gate is a "leak"; memory merely still held at exit (a workspace, a mapping never
    // torn down) is folded into one line unless asked for, as valgrind folds "still reachable".
    std::uint64_t held_bytes = 0, held_rows = 0, sizeless_opens = 0;
    for (const Leak& l : r.leaks) {
        if (fails_gate(r, l) && l.kind == "multicast") {
            fmt::format_to(it, "\nLeak of {} multicast objects ({} per device; no memory of their own) ({} references) "
                               "[{}, {}, {}] taken by {} at:\n",
                           l.allocations, human_bytes(l.bytes), l.references, l.cls, l.handle_type, l.owner, l.site.api);
        } else if (fails_gate(r, l) && l.kind == "io_registered") {
            fmt::format_to(it, "\nLeak of {} I/O memory registrations (another device's memory; none of the host's or the "
                               "GPU's) [{}, {}] taken by {} at:\n",
                           l.allocations, l.cls, l.owner, l.site.api);
        } else if (fails_gate(r, l)) {
            fmt::format_to(it, "\nLeak of {} bytes ({}) in {} allocations ({} references) [{}, {}, {}{}] taken by {} at:\n",
                           l.bytes, human_bytes(l.bytes), l.allocations, l.references, l.cls, l.handle_type, l.owner,
                           where(l), l.site.api);
        } else if (detail.show_held) {
            fmt::format_to(it, "\nHeld at exit, not a leak: {} bytes ({}) in {} allocations [{}, {}, {}{}] taken by {} at:\n",
                           l.bytes, human_bytes(l.bytes), l.allocations, l.cls, l.handle_type, l.owner, where(l), l.site.api);
        } else {
            held_bytes += l.bytes;
            ++held_rows;
            sizeless_opens += l.kind == "ipc" && l.bytes == 0;  // a legacy IPC open: its driver says no size
            continue;
        }
        frames(out, l.site, detail);
    }
    if (held_rows)
        fmt::format_to(it, "\nHeld at exit, not leaks: {} bytes ({}) in {} rows (unfreed or mapped-at-exit); shown with "
                           "show_held=1 or cumemaudit report --show-held\n",
                       held_bytes, human_bytes(held_bytes), held_rows);
    if (sizeless_opens)
        fmt::format_to(it, "{} of them: legacy IPC opens of another process's memory, whose size only the exporter knows "
                           "(cumemaudit merge with its report names the bytes)\n",
                       sizeless_opens);
    for (const Misuse& m : r.misuse) {
        fmt::format_to(it, "\nMisuse: {} returned {} {} times: {} [{}] at:\n", m.api, m.result, m.count, m.what,
                       m.owner);
        frames(out, m.site, detail);
    }
    for (const Reclaim& c : r.reclaimed) {
        fmt::format_to(it, "\nReclaimed by mode=enforce: {} bytes ({}) in {} allocations ({} references) taken by {} at:\n",
                       c.bytes, human_bytes(c.bytes), c.allocations, c.references, c.site.api);
        frames(out, c.site, detail);
    }
    // The last few out-of-memory moments: the first is usually the cause, the latest the state at the end.
    constexpr std::size_t kOomShown = 3;
    for (std::size_t i = r.oom.size() > kOomShown ? r.oom.size() - kOomShown : 0; i < r.oom.size(); ++i)
        out += oom_text(r.oom[i]);
    if (r.summary.oom_events > kOomShown)
        fmt::format_to(it, "  ({} out-of-memory answers in all)\n", r.summary.oom_events);
    for (const Teardown& t : r.teardowns) {
        fmt::format_to(it, "\nContext ended: {}{} at step {} freed {} bytes ({}) in {} allocations the program had not freed, at:\n",
                       t.api, t.device >= 0 ? fmt::format(" (device {})", t.device) : "", t.step, t.bytes,
                       human_bytes(t.bytes), t.allocations);
        frames(out, t.site, detail);
        for (const Leak& l : t.freed) {
            fmt::format_to(it, "  {} bytes ({}) in {} allocations [{}, {}] made by {} at:\n", l.bytes, human_bytes(l.bytes),
                           l.allocations, l.kind, l.owner, l.site.api);
            frames(out, l.site, detail);
        }
    }
    if (r.teardowns.size() == kTeardownsKept)
        fmt::format_to(it, "  (at most the first {} context ends are listed; all of them freed {} bytes)\n", kTeardownsKept,
                       r.summary.teardown_freed_bytes);
    // A kernel stack above the driver's default: memory no allocation names, kept until the limit is lowered.
    for (const Context& c : r.contexts) {
        // (none held: the driver gave it back at a refused launch, and the next launch takes it again)
        if (c.stack_bytes_per_thread <= kDefaultStackBytesPerThread || c.local_memory_bytes == 0) continue;
        fmt::format_to(it, "\nKernel stacks of {}{}: {} ({} per thread{}){}\n",
                       c.primary ? "the primary context" : "a context",
                       c.device >= 0 ? fmt::format(" on device {}", c.device) : "", human_bytes(c.local_memory_bytes),
                       human_bytes(c.stack_bytes_per_thread),
                       c.stack_set_bytes_per_thread == c.stack_bytes_per_thread ? ", the limit set"
                                                                                : ", raised by a launch of a kernel with that much local memory",
                       c.stack_set_bytes_per_thread == c.stack_bytes_per_thread ? " at:" : "");
        if (c.stack_set_bytes_per_thread == c.stack_bytes_per_thread) frames(out, c.stack_set_site, detail);
    }
    // A device heap above the driver's default: reserved by a kernel that calls malloc, kept as long as its context.
    for (const Context& c : r.contexts) {
        if (c.malloc_heap_bytes <= heap_reservation(kDefaultHeapBytes)) continue;
        fmt::format_to(it, "\nDevice heap of {}{}: {}, reserved by the first launch of {}{}\n",
                       c.primary ? "the primary context" : "a context",
                       c.device >= 0 ? fmt::format(" on device {}", c.device) : "", human_bytes(c.malloc_heap_bytes),
                       c.malloc_heap_kernel.empty() ? "a kernel that calls malloc" : c.malloc_heap_kernel,
                       c.malloc_heap_site.frames.empty() && c.malloc_heap_site.python_frames.empty() ? "" : " at:");
        frames(out, c.malloc_heap_site, detail);
    }
    // Streams whose creations took device memory: part of the context's reservation, kept as long as it.
    for (const Context& c : r.contexts) {
        if (c.stream_bytes == 0) continue;
        fmt::format_to(it, "\nStreams of {}{}: {} made, their creations took {}; the last that took some at:\n",
                       c.primary ? "the primary context" : "a context",
                       c.device >= 0 ? fmt::format(" on device {}", c.device) : "", c.streams_created,
                       human_bytes(c.stream_bytes));
        frames(out, c.stream_site, detail);
    }
    // Pools with memory, and the program's own: idle memory is device memory no owner's figures hold.
    for (const Pool& p : r.pools) {
        if (p.origin == "default" && p.reserved_bytes == 0) continue;
        fmt::format_to(it, "\nPool {} ({}, {}{}): reserved {}, used {}, idle {}, peak {}{}{}\n", p.id, p.origin, p.location,
                       p.destroyed ? ", destroyed" : "", human_bytes(p.reserved_bytes), human_bytes(p.used_bytes),
                       human_bytes(p.idle_bytes), human_bytes(p.peak_reserved_bytes),
                       p.release_threshold != 0 ? ", keeps " + human_bytes(p.release_threshold) + " idle at a synchronisation" : "",
                       p.site.api.empty() ? "" : ", created at:");
        if (!p.site.api.empty()) frames(out, p.site, detail);
    }
    for (const MemoryReturn& m : r.returns) {
        const std::string what = m.what != "pool" ? std::string("graph memory")
                                 : m.pool != 0    ? fmt::format("idle memory of pool {}", m.pool)
                                                  : std::string("idle pool memory");
        fmt::format_to(it, "\nThe driver took back {} ({} bytes) of {}{} at step {}, {} {}, at:\n", human_bytes(m.bytes),
                       m.bytes, what, m.device >= 0 ? fmt::format(" on device {}", m.device) : "", m.step,
                       m.why == "refusal" ? "before refusing" : "at", m.api);
        frames(out, m.site, detail);
    }
    if (r.returns.size() == kReturnsKept)
        fmt::format_to(it, "  (at most the first {} returns are listed; the driver took back {} bytes in all)\n", kReturnsKept,
                       r.summary.returned_bytes);
    out += graph_table(r);
    // The lines whose blocks a capture window left free, as the helper named them from PyTorch's history.
    if (!r.capture_profile.empty())
        fmt::format_to(it, "\nCapture profile ({} allocator events): the lines whose blocks were left free\n", r.capture_trace_entries);
    for (const CaptureHole& c : r.capture_profile)
        fmt::format_to(it, "  {}: {} allocations in pool {} (the largest {}); {} of it free in {} blocks\n", c.line,
                       c.allocations, c.pool, human_bytes(c.largest_bytes), human_bytes(c.hole_bytes), c.hole_blocks);
    // Where the steps lead: each device's forecast, once it has one.
    for (const Forecast& f : r.forecasts)
        if (f.oom_step) fmt::format_to(it, "\nForecast: {}\n", forecast_line(f));
    for (const SuppressionUse& s : r.suppressions)
        if (s.hits) fmt::format_to(it, "\nSuppressed {} rows by {}", s.hits, s.rule);
    if (r.summary.suppressed_leaks + r.summary.suppressed_misuse) out += '\n';
    fmt::format_to(it, "\n{}\n", summary_line(r.summary));
    return out;
}

}  // namespace cumemaudit::report
