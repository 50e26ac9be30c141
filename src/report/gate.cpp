#include "gate.hpp"

#include "human_bytes.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace cumemaudit::report {

std::string unfreed_phrase(const Summary& s) {
    if (s.unfreed_bytes == 0 && s.unfreed_allocations > 0)
        return fmt::format("0 bytes unfreed at exit in {} allocations", s.unfreed_allocations);
    return fmt::format("{} bytes unfreed at exit", s.unfreed_bytes);
}

std::vector<std::string> gate_failures(const Report& r, const FailOn& f, std::optional<std::uint64_t> max_leaked_bytes) {
    std::vector<std::string> why;
    const Summary& s = r.summary;
    if (max_leaked_bytes) {
        if (s.leaked_bytes > *max_leaked_bytes)
            why.push_back(fmt::format("{} bytes leaked in {} allocations, more than the allowed {}{}", s.leaked_bytes,
                                      s.leaked_allocations, *max_leaked_bytes,
                                      *max_leaked_bytes >= 1024 ? " (" + human_bytes(*max_leaked_bytes) + ")" : ""));
    } else if (f.leaks && (s.leaked_bytes > 0 || s.leaked_allocations > 0)) {
        why.push_back(fmt::format("{} bytes leaked in {} allocations ({} references)", s.leaked_bytes,
                                  s.leaked_allocations, s.leaked_references));
    }
    if (f.leaks && s.leaked_multicast_objects > 0)
        why.push_back(fmt::format("{} multicast objects never released", s.leaked_multicast_objects));
    // mode=enforce released these for the program: the leak is still in the code, and a CI job run with
    // enforce must not pass it.
    if (f.leaks && (s.reclaimed_bytes > 0 || s.reclaimed_references > 0))
        why.push_back(fmt::format("{} bytes reclaimed by mode=enforce in {} allocations ({} references the program "
                                  "never released)",
                                  s.reclaimed_bytes, s.reclaimed_allocations, s.reclaimed_references));
    if (f.unfreed && (s.unfreed_bytes > 0 || s.unfreed_allocations > 0))
        why.push_back(unfreed_phrase(s));
    if (f.misuse && s.misuse_events > 0) why.push_back(fmt::format("{} misuse events", s.misuse_events));
    return why;
}

bool gate_fails(const Report& r, const FailOn& f, std::optional<std::uint64_t> max_leaked_bytes) {
    return !gate_failures(r, f, max_leaked_bytes).empty();
}

std::vector<FailingRow> failing_rows(const Report& r, const FailOn& f, std::optional<std::uint64_t> max_leaked_bytes) {
    std::vector<FailingRow> rows;
    // A budget replaces fail_on=leaks for leak rows: they fail together, only above it.
    const bool leaks_fail = max_leaked_bytes ? r.summary.leaked_bytes > *max_leaked_bytes : f.leaks;
    for (const Leak& l : r.leaks)
        if ((is_leak(l) && leaks_fail) || (l.cls == "unfreed" && f.unfreed))
            rows.push_back({&l.site, l.cls, l.bytes, l.allocations});
    if (f.leaks)
        for (const Reclaim& c : r.reclaimed) rows.push_back({&c.site, "reclaimed", c.bytes, c.allocations});
    std::stable_sort(rows.begin(), rows.end(), [](const FailingRow& a, const FailingRow& b) { return a.bytes > b.bytes; });
    return rows;
}

int exit_code_after_gate(int program_exit_code, bool gate_failed, int exitcode) {
    if (exit_status_failed(program_exit_code)) return program_exit_code;
    return gate_failed ? exitcode : program_exit_code;
}

int exit_code_without_report(int program_exit_code, bool no_gate, std::optional<bool> gate_failed, int exitcode) {
    if (exit_status_failed(program_exit_code) || no_gate) return program_exit_code;
    return gate_failed.value_or(false) ? exitcode : kExitNoReport;
}

bool exit_status_failed(int program_exit_code) { return (program_exit_code & 0xff) != 0; }

}  // namespace cumemaudit::report
