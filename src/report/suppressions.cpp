#include "suppressions.hpp"

#include "common/paths.hpp"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cumemaudit::report {
namespace {

std::string_view trim(std::string_view s) {
    const auto b = s.find_first_not_of(" \t\r");
    if (b == std::string_view::npos) return {};
    return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

bool glob(const std::string& pattern, std::string_view text) {
    return !text.empty() && ::fnmatch(pattern.c_str(), std::string(text).c_str(), 0) == 0;
}

bool matches(const std::string& pattern, const Frame& f) {
    return glob(pattern, f.symbol) || glob(pattern, f.object) || glob(pattern, basename(f.object)) ||
           glob(pattern, f.file) || glob(pattern, basename(f.file));
}

// A Python frame by its function, its file (path or basename) or basename:line, e.g. "train.py:42".
bool matches(const std::string& pattern, const PythonFrame& f) {
    return glob(pattern, f.function) || glob(pattern, f.file) || glob(pattern, basename(f.file)) ||
           glob(pattern, std::string(basename(f.file)) + ":" + std::to_string(f.line));
}

template <typename Frames>
bool any_matches(const std::string& pattern, const Frames& frames) {
    for (const auto& f : frames)
        if (matches(pattern, f)) return true;
    return false;
}

}  // namespace

Suppressions Suppressions::parse(std::string_view text, const std::string& source) {
    Suppressions out;
    std::size_t lineno = 0;
    while (!text.empty()) {
        const auto nl = text.find('\n');
        const std::string_view raw = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        ++lineno;
        const std::string_view line = trim(raw);
        if (line.empty() || line.front() == '#') continue;
        const auto where = [&] { return source + ":" + std::to_string(lineno) + ": "; };
        const auto colon = line.find(':');
        if (colon == std::string_view::npos)
            throw SuppressionError(where() + "expected 'leak:PATTERN' or 'misuse:PATTERN': " + std::string(line));
        const std::string_view type = trim(line.substr(0, colon));
        const std::string_view pattern = trim(line.substr(colon + 1));
        Rule rule;
        if (type == "leak")
            rule.type = Type::leak;
        else if (type == "misuse")
            rule.type = Type::misuse;
        else
            throw SuppressionError(where() + "unknown rule type '" + std::string(type) +
                                   "' (expected leak or misuse): " + std::string(line));
        if (pattern.empty()) throw SuppressionError(where() + "empty pattern: " + std::string(line));
        rule.pattern = pattern;
        rule.text = std::string(type) + ":" + std::string(pattern);
        out.rules_.push_back(std::move(rule));
    }
    return out;
}

Suppressions Suppressions::load(const std::string& path) {
    // Read inside the audited program: a FIFO would block it forever and /dev/zero would never
    // end, so only a regular file of bounded size is read (opened without blocking, checked by fstat).
    constexpr off_t kMaxBytes = 1 << 20;
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) throw SuppressionError(path + ": cannot read the suppression file");
    struct stat st {};
    std::string text;
    std::string problem;
    if (::fstat(fd, &st) != 0)
        problem = std::strerror(errno);
    else if (!S_ISREG(st.st_mode))
        problem = "not a regular file";
    else if (st.st_size > kMaxBytes)
        problem = "larger than 1 MiB (" + std::to_string(st.st_size) + " bytes)";
    else {
        // Read to the end, whatever st_size says (files under /proc say 0): a read error is a problem too.
        char buf[65536];
        for (;;) {
            const ssize_t n = ::read(fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                problem = std::strerror(errno);
                break;
            }
            if (n == 0) break;
            text.append(buf, static_cast<std::size_t>(n));
            if (text.size() > static_cast<std::size_t>(kMaxBytes)) {
                problem = "larger than 1 MiB";
                break;
            }
        }
    }
    ::close(fd);
    if (!problem.empty()) throw SuppressionError(path + ": cannot read the suppression file: " + problem);
    return parse(text, path);
}

const Suppressions::Rule* Suppressions::match(Type type, const Site& site) {
    for (Rule& r : rules_) {
        if (r.type != type) continue;
        if (any_matches(r.pattern, site.frames) || any_matches(r.pattern, site.python_frames)) {
            ++r.hits;
            return &r;
        }
    }
    return nullptr;
}

}  // namespace cumemaudit::report
