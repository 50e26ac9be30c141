// Report files: loading with messages that name the file and the problem, and writing atomically.
#include "job.hpp"
#include "report.hpp"

#include "common/paths.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cumemaudit::report {
namespace {

std::string errno_text(const char* what, const std::string& path) {
    return std::string(what) + " " + path + ": " + std::strerror(errno);
}

// Reads with plain POSIX calls: write_atomic runs inside the audited process, load in the CLI, and
// neither should depend on iostream state.
bool read_file(const std::string& path, std::string& out, std::string& err) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err = std::strerror(errno);
        return false;
    }
    char buf[65536];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            err = std::strerror(errno);
            ::close(fd);
            return false;
        }
        if (n == 0) break;
        out.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return true;
}

bool write_all(int fd, const std::string& data) {
    std::size_t done = 0;
    while (done < data.size()) {
        const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += static_cast<std::size_t>(n);
    }
    return true;
}

}  // namespace

std::string report_path(const std::string& dir, const std::string& host, std::int64_t pid, std::int64_t rank) {
    std::string p = dir.empty() ? "." : dir;
    if (p.back() != '/') p += '/';
    p += "cumemaudit." + host + "." + std::to_string(pid);
    if (rank >= 0) p += ".r" + std::to_string(rank);
    return p + ".json";
}

std::string expand_report_dir(const std::string& dir, const std::string& host, std::int64_t pid, std::int64_t rank) {
    std::string out;
    for (std::size_t i = 0; i < dir.size(); ++i) {
        const char c = i + 1 < dir.size() && dir[i] == '%' ? dir[i + 1] : '\0';
        if (c == 'h')
            out += host;
        else if (c == 'p')
            out += std::to_string(pid);
        else if (c == 'r')
            out += rank >= 0 ? std::to_string(rank) : "norank";
        else if (c == '%')
            out += '%';
        else {
            out += dir[i];
            continue;
        }
        ++i;
    }
    return out;
}

nlohmann::json load_json(const std::string& path) {
    std::string text, err;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) throw ReportError(path + ": is a directory, not a report file");
    if (!read_file(path, text, err)) throw ReportError(path + ": cannot read: " + err);
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) throw ReportError(path + ": empty file, not a report");
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        // A parse error at the very end means the writer stopped early (or something copied half a file).
        const bool truncated = e.byte >= text.size();
        throw ReportError(path + (truncated ? ": truncated JSON (ends early): " : ": not JSON: ") + e.what());
    }
    return j;
}

Report load(const std::string& path) {
    const nlohmann::json j = load_json(path);
    try {
        return from_json(j);
    } catch (const ReportError& e) {
        throw ReportError(path + ": " + e.what());
    } catch (const nlohmann::json::exception& e) {
        throw ReportError(path + ": " + e.what());
    }
}

namespace {

// Any model with a to_string(): a process report or a job report.
template <class Model>
std::string write_model_atomic(const std::string& path, const Model& r) noexcept {
    try {
        struct stat st {};
        if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
            return "refusing to write report " + path + ": the destination is a symlink";
        const auto slash = path.rfind('/');
        const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
        const std::string base(basename(path));
        static std::atomic<unsigned> counter{0};  // two threads checkpointing at once get distinct temps
        const std::string tmp = dir + "/." + base + "." + std::to_string(::getpid()) + "." +
                                std::to_string(counter.fetch_add(1)) + ".tmp";
        const std::string text = to_string(r);  // before the temp exists: only this can throw
        const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0) return errno_text("cannot create", tmp);
        if (!write_all(fd, text) || ::fsync(fd) != 0) {
            std::string e = errno_text("cannot write", tmp);
            ::close(fd);
            ::unlink(tmp.c_str());
            return e;
        }
        if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {  // rename replaces, never follows, a link
            std::string e = errno_text("cannot rename onto", path);
            ::unlink(tmp.c_str());
            return e;
        }
        if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
            ::fsync(dfd);  // the rename itself survives a crash; best effort
            ::close(dfd);
        }
        return {};
    } catch (const std::exception& e) {  // allocation failure while serializing: report it, never throw
        return std::string("cannot write report ") + path + ": " + e.what();
    }
}

}  // namespace

std::string write_atomic(const std::string& path, const Report& r) noexcept { return write_model_atomic(path, r); }
std::string write_atomic(const std::string& path, const JobReport& r) noexcept { return write_model_atomic(path, r); }

}  // namespace cumemaudit::report
