#include "gate.hpp"

#include <fmt/format.h>

namespace cumemaudit::report {

FailOn parse_fail_on(std::string_view text) {
    FailOn f{false, false, false};
    bool none = false, any = false;
    std::size_t start = 0;
    while (start <= text.size()) {
        const auto comma = text.find(',', start);
        const std::string_view word = text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
        if (word == "leaks")
            f.leaks = true;
        else if (word == "unfreed")
            f.unfreed = true;
        else if (word == "misuse")
            f.misuse = true;
        else if (word == "none")
            none = true;
        else
            throw GateError(fmt::format("fail_on: unknown word '{}' in '{}' (expected leaks, unfreed, misuse or none, "
                                        "comma-separated)",
                                        word, text));
        if (word != "none") any = true;
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    if (none && any) throw GateError(fmt::format("fail_on: 'none' cannot be combined with other words in '{}'", text));
    return f;
}

std::string to_string(const FailOn& f) {
    std::string s;
    for (auto [on, word] : {std::pair{f.leaks, "leaks"}, {f.unfreed, "unfreed"}, {f.misuse, "misuse"}})
        if (on) s += s.empty() ? word : std::string(",") + word;
    return s.empty() ? "none" : s;
}

std::vector<std::string> gate_failures(const Report& r, const FailOn& f, std::optional<std::uint64_t> max_leaked_bytes) {
    std::vector<std::string> why;
    const Summary& s = r.summary;
    if (max_leaked_bytes) {
        if (s.leaked_bytes > *max_leaked_bytes)
            why.push_back(fmt::format("{} bytes leaked in {} allocations, more than the allowed {}", s.leaked_bytes,
                                      s.leaked_allocations, *max_leaked_bytes));
    } else if (f.leaks && (s.leaked_bytes > 0 || s.leaked_allocations > 0)) {
        why.push_back(fmt::format("{} bytes leaked in {} allocations ({} references)", s.leaked_bytes,
                                  s.leaked_allocations, s.leaked_references));
    }
    // mode=enforce released these for the program: the leak is still in the code, and a CI job run with
    // enforce must not pass it.
    if (f.leaks && (s.reclaimed_bytes > 0 || s.reclaimed_references > 0))
        why.push_back(fmt::format("{} bytes reclaimed by mode=enforce in {} allocations ({} references the program "
                                  "never released)",
                                  s.reclaimed_bytes, s.reclaimed_allocations, s.reclaimed_references));
    if (f.unfreed && (s.unfreed_bytes > 0 || s.unfreed_allocations > 0))
        why.push_back(fmt::format("{} bytes unfreed at exit", s.unfreed_bytes));
    if (f.misuse && s.misuse_events > 0) why.push_back(fmt::format("{} misuse events", s.misuse_events));
    return why;
}

bool gate_fails(const Report& r, const FailOn& f, std::optional<std::uint64_t> max_leaked_bytes) {
    return !gate_failures(r, f, max_leaked_bytes).empty();
}

int exit_code_after_gate(int program_exit_code, bool gate_failed, int exitcode) {
    if (program_exit_code != 0) return program_exit_code;
    return gate_failed ? exitcode : 0;
}

}  // namespace cumemaudit::report
