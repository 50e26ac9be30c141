#include "run_preflight.hpp"

#include "report/report.hpp"
#include "report/suppressions.hpp"
#include "run_env.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cumemaudit::cli {
namespace {

constexpr const char* kNotStarted = "; the program was not started";

// The part of report_dir every process of the job shares: the directory before the first %h, %p or %r
// (ranks may write to audit/%h/%p; only audit exists before any of them starts).
std::string shared_part(const std::string& dir) {
    std::string head = dir.empty() ? "." : dir;
    for (std::size_t i = 0; i + 1 < dir.size(); ++i) {
        if (dir[i] != '%') continue;
        const char c = dir[i + 1];
        if (c == 'h' || c == 'p' || c == 'r') {
            const std::size_t slash = dir.rfind('/', i);
            head = slash == std::string::npos ? "." : dir.substr(0, slash == 0 ? 1 : slash);
            break;
        }
        ++i;  // "%%" and any other pair are kept whole
    }
    return report::expand_report_dir(head, "", 0, -1);  // only %% is left to expand
}

// Empty when a file can be made in `dir` (it is removed again), else why not.
std::string probe(const std::string& dir) {
    const std::string path = dir + "/.cumemaudit-probe." + std::to_string(::getpid());
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return std::strerror(errno);
    const bool wrote = ::write(fd, "x", 1) == 1;
    const int err = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return wrote ? "" : std::strerror(err);
}

void check_report_dir(const std::string& report_dir) {
    const std::string dir = shared_part(report_dir);
    if (const std::string err = report::make_report_dir(dir); !err.empty())
        throw UsageError(fmt::format("report_dir {}: cannot make it ({}){}", dir, err, kNotStarted));
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        throw UsageError(fmt::format("report_dir {}: not a directory{}", dir, kNotStarted));
    // The shim refuses it at every write; the same words, before anything ran.
    if (const std::string unsafe = report::unsafe_report_dir(dir); !unsafe.empty())
        throw UsageError(unsafe + kNotStarted);
    if (const std::string err = probe(dir); !err.empty())
        throw UsageError(fmt::format("report_dir {}: cannot write a file there ({}){}", dir, err, kNotStarted));
}

}  // namespace

void preflight(const options::Options& effective) {
    check_report_dir(effective.report_dir);
    if (effective.suppressions.empty()) return;
    try {
        report::Suppressions::load(effective.suppressions);  // the shim's own reader: one grammar, one limit
    } catch (const report::SuppressionError& e) {
        throw UsageError(std::string(e.what()) + kNotStarted);
    }
}

}  // namespace cumemaudit::cli
