// gate: the one policy deciding whether a report fails a run. The shim applies it at exit (turning a clean
// exit into `exitcode`) and `cumemaudit check` applies it to reports already written, so both must agree.
#pragma once

#include "common/option_types.hpp"
#include "report.hpp"

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cumemaudit::report {

// What fails the gate: the fail_on option's type, parsed once by the options table (common/option_types.hpp).
using options::FailOn;
using options::parse_fail_on;
using options::to_string;
using GateError = options::OptionError;

// The one definition of a leak, the one every view counts (summary.leaked_bytes, the text summary, diff,
// merge, the HTML page): memory nothing can release any more (unreachable) or that only an open exported fd
// still pins (open-export). Unfreed and mapped-at-exit rows are held at exit, never leaked; the gate fails on
// unfreed rows only when fail_on asks.
inline bool is_leak(const Leak& l) { return l.cls == "unreachable" || l.cls == "open-export"; }

// "4096 bytes unfreed at exit"; rows of no bytes (I/O memory registered, buffers mapped from external memory)
// add how many allocations, so a failing gate never reads as "0 bytes".
std::string unfreed_phrase(const Summary&);

// Why the report fails, one reason per criterion; empty when it passes. max_leaked_bytes is a budget:
// given, leaks fail only above it, and it applies even with fail_on=none.
std::vector<std::string> gate_failures(const Report&, const FailOn&, std::optional<std::uint64_t> max_leaked_bytes);

bool gate_fails(const Report&, const FailOn&, std::optional<std::uint64_t> max_leaked_bytes);

// A row of the report that fails the gate: a leak row (is_leak), an unfreed row when fail_on asks, or
// memory mode=enforce reclaimed (cls "reclaimed"), under the same criteria as gate_failures.
struct FailingRow {
    const Site* site = nullptr;  // into the report
    std::string cls;
    std::uint64_t bytes = 0, allocations = 0;
};

// The rows behind gate_failures, most bytes first (ties keep the report's order); empty when it passes on
// rows (a report failing on misuse alone has none).
std::vector<FailingRow> failing_rows(const Report&, const FailOn&, std::optional<std::uint64_t> max_leaked_bytes);

// The exit code a gated process ends with: a program that failed keeps its own code; a clean exit becomes
// `exitcode` (option, default 23 like LSan) when the gate fails.
int exit_code_after_gate(int program_exit_code, bool gate_failed, int exitcode);

// A clean exit with no report on disk: the audit failed, not the program, and nothing a CI job could check
// was left. Its own code, so a log never reads a full disk or a bad report_dir as a leak (23); 125 as
// `env`, `timeout` and `git bisect run` use it: the tool itself could not do its job.
constexpr int kExitNoReport = 125;

// The exit code when no report could be written. A program that failed keeps its own code, and fail_on=none
// changes nothing (no gate); a gate that failed on what the process knew in memory keeps `exitcode` (the
// leak is real, only its file is missing); otherwise kExitNoReport. `gate_failed` is empty where no report
// could even be built.
int exit_code_without_report(int program_exit_code, bool no_gate, std::optional<bool> gate_failed, int exitcode);
// What the parent sees is the status's low byte: exit(256) reads as success, and must not hide a failed gate.
bool exit_status_failed(int program_exit_code);

}  // namespace cumemaudit::report
