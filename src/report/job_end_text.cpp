#include "job_end_text.hpp"

#include "human_bytes.hpp"
#include "site_naming.hpp"

#include <fmt/format.h>

namespace cumemaudit::report {
namespace {

std::string after_step(const JobRankEnd& e) { return e.step >= 0 ? fmt::format(" after step {}", e.step) : ""; }

// "; exit code 1": the code the launcher saw, where the process exited at all.
std::string code_after(const JobRankEnd& e) {
    if (!e.signal.empty()) return "; killed by " + e.signal;
    return e.exit_code ? fmt::format("; exit code {}", *e.exit_code) : "; no exit report";
}

}  // namespace

std::string end_phrase(const JobRankEnd& e) {
    if (e.how == "out_of_memory") {
        std::string t = "ran out of memory";
        if (e.step >= 0) t += fmt::format(" at step {}", e.step);
        t += fmt::format(": {}", e.api);
        if (e.requested_bytes > 0) t += " " + human_bytes(e.requested_bytes);
        if (e.site) t += " at " + where(*e.site);
        t += fmt::format(", {} of {} used was leaked", human_bytes(e.leaked_bytes), human_bytes(e.used_bytes));
        return t + code_after(e);
    }
    if (e.how == "exit") return fmt::format("exited with code {}{}", e.exit_code.value_or(-1), after_step(e));
    if (e.how == "signal") return fmt::format("was killed by {}{}", e.signal, after_step(e));
    if (e.how == "no_exit_report")
        return fmt::format("left no exit report, only a checkpoint{}: it died without a word", after_step(e));
    if (e.how == "exec") return "was replaced by an exec of " + e.replaced_by_exec;
    if (e.how == "clean") return "exited cleanly";
    return {};
}

std::string end_label(const JobRankEnd& e) {
    if (e.how == "out_of_memory") return e.step >= 0 ? fmt::format("out of memory at step {}", e.step) : "out of memory";
    if (e.how == "exit") return fmt::format("exit code {}", e.exit_code.value_or(-1));
    if (e.how == "signal") return "killed by " + e.signal;
    if (e.how == "no_exit_report") return "no exit report";
    if (e.how == "exec") return "exec";
    if (e.how == "clean") return "clean exit";
    return {};
}

}  // namespace cumemaudit::report
