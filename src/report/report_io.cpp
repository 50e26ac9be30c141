// Report files: loading with messages that name the file and the problem, and writing atomically.
#include "job.hpp"
#include "naming_file.hpp"
#include "report.hpp"
#include "report_parse.hpp"
#include "text_file.hpp"

#include "common/paths.hpp"

#include <rapidjson/error/en.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cumemaudit::report {
namespace {

constexpr off_t kMaxReportBytes = off_t{4} << 30;
constexpr std::int64_t kMaxRanks = 1 << 20;  // more than any job has; a bigger world_size is a corrupt file
constexpr int kMaxDepth = 128;               // reports nest a few levels; deeper is hostile (stack overflow)

// Deepest nesting of arrays and objects, strings skipped; stops counting past kMaxDepth.
int nesting(const std::string& text) {
    int depth = 0, deepest = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < text.size() && deepest <= kMaxDepth; ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') ++i;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return deepest;
}

std::string errno_text(const char* what, const std::string& path) {
    return std::string(what) + " " + path + ": " + std::strerror(errno);
}

// Reads with plain POSIX calls: write_atomic runs inside the audited process, load in the CLI, and
// neither should depend on iostream state.
bool read_file(const std::string& path, std::string& out, std::string& err) {
    // O_NONBLOCK and the fstat below: a FIFO named like a report must not block the CLI forever.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        err = std::strerror(errno);
        return false;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > kMaxReportBytes) {
        err = !S_ISREG(st.st_mode) ? "not a regular file" : "larger than 4 GiB, not a report";
        ::close(fd);
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

std::string file_safe(const std::string& name) {
    std::string out = name.empty() ? "unknown" : name;
    for (char& c : out)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') || (c & 0x80)) c = '_';
    return out;
}

// A name nobody can guess: a stale temp (SIGKILL mid-write) or a planted one never blocks the next report.
std::string random_suffix() {
    std::uint64_t r = 0;
    if (::getrandom(&r, sizeof r, GRND_NONBLOCK) != sizeof r) {
        static std::atomic<std::uint64_t> mix{0};
        r = (static_cast<std::uint64_t>(::getpid()) << 32) ^ static_cast<std::uint64_t>(::time(nullptr)) ^
            (mix.fetch_add(0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull);
    }
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(r));
    return buf;
}

}  // namespace

std::string report_path(const std::string& dir, const std::string& host, std::int64_t pid, std::int64_t rank) {
    std::string p = dir.empty() ? "." : dir;
    if (p.back() != '/') p += '/';
    p += "cumemaudit." + file_safe(host) + "." + std::to_string(pid);
    if (rank >= 0) p += ".r" + std::to_string(rank);
    return p + ".json";
}

std::string expand_report_dir(const std::string& dir, const std::string& host, std::int64_t pid, std::int64_t rank) {
    std::string out;
    for (std::size_t i = 0; i < dir.size(); ++i) {
        const char c = i + 1 < dir.size() && dir[i] == '%' ? dir[i + 1] : '\0';
        if (c == 'h')
            out += file_safe(host);
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

std::string read_report_text(const std::string& path) {
    std::string text, err;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) throw ReportError(path + ": is a directory, not a report file");
    if (!read_file(path, text, err)) throw ReportError(path + ": cannot read: " + err);
    if (nesting(text) > kMaxDepth)
        throw ReportError(path + ": nested deeper than " + std::to_string(kMaxDepth) + " levels, not a report");
    return text;
}

void parse_report_text(const std::string& path, std::string& text, rapidjson::Document& doc) {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) throw ReportError(path + ": empty file, not a report");
    constexpr unsigned kFlags = rapidjson::kParseInsituFlag | rapidjson::kParseValidateEncodingFlag | rapidjson::kParseFullPrecisionFlag;
    doc.ParseInsitu<kFlags>(text.data());
    if (!doc.HasParseError()) return;
    // A parse error at the very end means the writer stopped early (or something copied half a file).
    const std::size_t at = doc.GetErrorOffset();
    const bool truncated = at >= text.find_last_not_of(" \t\r\n") + 1 && doc.GetParseError() != rapidjson::kParseErrorDocumentRootNotSingular;
    throw ReportError(path + (truncated ? ": truncated JSON (ends early): " : ": not JSON: ") +
                      rapidjson::GetParseError_En(doc.GetParseError()) + " at byte " + std::to_string(at));
}

void check_ranks(std::int64_t world_size, std::int64_t rank) {
    if (world_size > kMaxRanks || rank > kMaxRanks)
        throw ReportError("world_size " + std::to_string(world_size) + " / rank " + std::to_string(rank) +
                          ": more ranks than any job has (at most " + std::to_string(kMaxRanks) + ")");
}

Report load(const std::string& path) {
    std::string text = read_report_text(path);  // every reader goes through its bounds
    rapidjson::Document doc;
    parse_report_text(path, text, doc);
    return naming_file(path, [&] {
        Report r = from_json(doc);
        check_ranks(r.process.world_size, r.process.rank);
        return r;
    });
}

std::string unsafe_report_dir(const std::string& dir) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return {};  // the write names that problem
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) == 0) return {};
    // Others may write here: only the sticky bit stops them renaming a report of theirs over ours, and only
    // when the directory is root's or ours (its owner may rename anything in it).
    const bool sticky = (st.st_mode & S_ISVTX) != 0;
    if (sticky && (st.st_uid == 0 || st.st_uid == ::geteuid())) return {};
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return "report_dir " + dir + " belongs to uid " + std::to_string(st.st_uid) + " and is writable by others (mode " +
           mode + (sticky ? ", sticky but not root's or this user's" : ", no sticky bit") +
           "): refusing to write reports there";
}

std::string make_report_dir(const std::string& dir) {
    // Component by component with an explicit mode: under umask(0) a plain create would make it 0777, which
    // unsafe_report_dir then refuses. Already there is fine, whoever made it (the check above judges it).
    std::string path;
    std::size_t at = 0;
    while (at != std::string::npos) {
        const std::size_t next = dir.find('/', at + 1);
        path = dir.substr(0, next);
        at = next;
        if (path.empty() || path == "/") continue;
        if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return path + ": " + std::strerror(errno);
    }
    return {};
}

namespace {

// The one writer of report files, for any model with a to_string() (a process report or a job report):
// a random temp name beside the destination, created O_EXCL|O_NOFOLLOW with `mode`, fsynced, renamed over
// the destination (which replaces a symlink there, never writes through it), then the directory fsynced.
// With `taken` (write_new), linked to the destination instead, which fails where anything is there.
template <class Model>
std::string write_model_atomic(const std::string& path, const Model& r, unsigned mode, bool* taken = nullptr) noexcept {
    try {
        const auto slash = path.rfind('/');
        const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
        const std::string base(basename(path));
        const std::string text = to_string(r);  // before the temp exists: only this can throw
        std::string tmp;
        int fd = -1;
        for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
            tmp = dir + "/." + base + "." + random_suffix() + ".tmp";
            fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode & 0777);
            if (fd < 0 && errno != EEXIST) break;
        }
        if (fd < 0) return errno_text("cannot create", tmp);
        ::fchmod(fd, mode & 0777);  // the umask must not widen or narrow what was asked
        if (!write_all(fd, text) || ::fsync(fd) != 0) {
            std::string e = errno_text("cannot write", tmp);
            ::close(fd);
            ::unlink(tmp.c_str());
            return e;
        }
        if (::close(fd) != 0) {
            std::string e = errno_text("cannot write", tmp);
            ::unlink(tmp.c_str());
            return e;
        }
        bool placed = false;
        if (taken != nullptr) {
            // link fails on anything at `path`, a dangling symlink included; a file system without hard links
            // (EPERM, ENOTSUP) gets an O_EXCL claim instead, replaced at once by the rename below.
            *taken = false;
            if (::link(tmp.c_str(), path.c_str()) == 0) {
                placed = true;
            } else if (errno == EEXIST) {
                *taken = true;
            } else if (const int claim = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode & 0777);
                       claim >= 0) {
                ::close(claim);
            } else {
                *taken = errno == EEXIST;
                std::string e = *taken ? std::string() : errno_text("cannot create", path);
                ::unlink(tmp.c_str());
                return e;
            }
            if (placed || *taken) {
                ::unlink(tmp.c_str());
                if (*taken) return {};
            }
        }
        // rename replaces a symlink at `path` itself and never writes through it.
        if (!placed && ::rename(tmp.c_str(), path.c_str()) != 0) {
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

std::string write_atomic(const std::string& path, const Report& r, unsigned mode) noexcept {
    return write_model_atomic(path, r, mode);
}
std::string write_new(const std::string& path, const Report& r, unsigned mode, bool* taken) noexcept {
    return write_model_atomic(path, r, mode, taken);
}
std::string write_atomic(const std::string& path, const JobReport& r, unsigned mode) noexcept {
    return write_model_atomic(path, r, mode);
}

namespace {
struct Text {
    const std::string& text;
};
const std::string& to_string(const Text& t) { return t.text; }
}  // namespace

std::string write_text_atomic(const std::string& path, const std::string& text, unsigned mode) noexcept {
    return write_model_atomic(path, Text{text}, mode);
}

}  // namespace cumemaudit::report
