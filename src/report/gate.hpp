// gate: the one policy deciding whether a report fails a run. The shim applies it at exit (turning a clean
// exit into `exitcode`) and `cumemaudit check` applies it to reports already written, so both must agree.
#pragma once

#include "report.hpp"

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cumemaudit::report {

// What fails the gate. Default `leaks`: unreachable and open-export memory (summary.leaked_*).
struct FailOn {
    bool leaks = true;
    bool unfreed = false;  // classic allocations live at exit
    bool misuse = false;
    friend bool operator==(const FailOn&, const FailOn&) = default;
};

class GateError : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

// "leaks", "unfreed", "misuse", "none", or a comma-separated combination such as "leaks,misuse".
// Throws GateError naming the bad word.
FailOn parse_fail_on(std::string_view);
std::string to_string(const FailOn&);

// Why the report fails, one reason per criterion; empty when it passes. max_leaked_bytes is a budget:
// given, leaks fail only above it, and it applies even with fail_on=none.
std::vector<std::string> gate_failures(const Report&, const FailOn&, std::optional<std::uint64_t> max_leaked_bytes);

bool gate_fails(const Report&, const FailOn&, std::optional<std::uint64_t> max_leaked_bytes);

// The exit code a gated process ends with: a program that failed keeps its own code; a clean exit becomes
// `exitcode` (option, default 23 like LSan) when the gate fails.
int exit_code_after_gate(int program_exit_code, bool gate_failed, int exitcode);

}  // namespace cumemaudit::report
