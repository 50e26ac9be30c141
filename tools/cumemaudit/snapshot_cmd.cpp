#include "snapshot_cmd.hpp"

#include "common/live_request.hpp"
#include "report/forecast_text.hpp"
#include "report/report.hpp"
#include "terminal_out.hpp"

#include <nlohmann/json.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace cumemaudit::cli {
namespace {

std::string proc(long pid, const std::string& rest = "") { return "/proc/" + std::to_string(pid) + rest; }

std::string read_small(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

// The value of a "Key:\tvalue" line of a /proc status file ("" if none).
std::string status_field(const std::string& status, const std::string& key) {
    std::istringstream in(status);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(key + ":", 0) == 0) return line.substr(line.find_first_not_of(" \t", key.size() + 1));
    return "";
}

// Whether a thread's status says it blocks `sig`: SigBlk is a hex mask, bit sig-1.
bool blocks(const std::string& status, int sig) {
    const std::string mask = status_field(status, "SigBlk");
    const std::size_t digit = static_cast<std::size_t>(sig - 1) / 4;
    if (mask.empty() || digit >= mask.size()) return false;
    const char c = mask[mask.size() - 1 - digit];
    const int nibble = std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(c) - 'a' + 10;
    return (nibble >> ((sig - 1) % 4)) & 1;
}

struct Failed {
    int code;
    std::string message;
};

// The shim's checkpoint thread: named live::kCheckpointThreadName, and blocking every signal (while it waits,
// sigtimedwait unblocks the request signal alone, so that one is not checked). A thread of the program's
// that merely bears the name takes signals, and is never sent the request.
bool blocks_all(const std::string& status) {
    for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGTERM})
        if (!blocks(status, sig)) return false;
    return true;
}

// A zombie (exited, not yet reaped by its parent) has a /proc entry and no threads to ask.
bool exited(long pid) {
    const std::string stat = read_small(proc(pid, "/stat"));
    const auto close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() && (stat[close + 2] == 'Z' || stat[close + 2] == 'X');
}

long checkpoint_thread(long pid) {
    if (exited(pid)) throw Failed{snapshot_no_process, "process " + std::to_string(pid) + " has exited (a zombie, not yet reaped)"};
    DIR* dir = ::opendir(proc(pid, "/task").c_str());
    if (dir == nullptr) {
        if (errno == EACCES) throw Failed{snapshot_not_permitted, "cannot read " + proc(pid, "/task") + ": " + std::strerror(errno)};
        throw Failed{snapshot_no_process, "no process " + std::to_string(pid)};
    }
    long found = 0;
    bool named = false;
    while (const dirent* e = ::readdir(dir)) {
        if (e->d_name[0] == '.') continue;
        const std::string task = proc(pid, std::string("/task/") + e->d_name);
        if (read_small(task + "/comm") != std::string(live::kCheckpointThreadName) + "\n") continue;
        named = true;
        if (blocks_all(read_small(task + "/status"))) found = std::atol(e->d_name);
    }
    ::closedir(dir);
    if (found != 0) return found;
    if (named)
        throw Failed{snapshot_not_audited, "process " + std::to_string(pid) + " has a thread named " +
                                               live::kCheckpointThreadName + " that is not the shim's checkpoint thread"};
    const bool loaded = read_small(proc(pid, "/maps")).find("libcumemaudit") != std::string::npos;
    throw Failed{snapshot_not_audited,
                 "process " + std::to_string(pid) +
                     (loaded ? " has the shim loaded but has not started its audit (no CUDA call yet)"
                             : " is not audited (libcumemaudit.so is not loaded there)")};
}

std::uint64_t request_number() {
    std::uint64_t n = 0;
    if (::getrandom(&n, sizeof n, 0) != sizeof n) throw Failed{2, std::string("getrandom: ") + std::strerror(errno)};
    return live::request_number(n);
}

void ask(long pid, long tid, std::uint64_t number) {
    siginfo_t info{};
    info.si_signo = live::request_signal();
    info.si_code = SI_QUEUE;  // a user's signal with a value: the only kind another process may send this way
    info.si_pid = ::getpid();
    info.si_uid = ::getuid();
    info.si_value.sival_ptr = reinterpret_cast<void*>(static_cast<std::uintptr_t>(number));
    if (::syscall(SYS_rt_tgsigqueueinfo, pid, tid, live::request_signal(), &info) == 0) return;
    if (errno == EPERM)
        throw Failed{snapshot_not_permitted, "not permitted to signal process " + std::to_string(pid) + " (another user's)"};
    if (errno == ESRCH) throw Failed{snapshot_no_process, "process " + std::to_string(pid) + " exited before it was asked"};
    throw Failed{2, std::string("rt_tgsigqueueinfo: ") + std::strerror(errno)};
}

bool alive(long pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

// The answer's text, once it is there: read from the directory of the process's user alone (checked: a
// directory, not a link, that user's, no access for others), without following a link at the answer's name,
// from a regular file of that user's with no second name. Empty while there is none yet.
std::string answer_text(const std::string& dir, const std::string& path, uid_t uid) {
    struct stat d {};
    if (::lstat(dir.c_str(), &d) != 0) {
        if (errno == EACCES) throw Failed{snapshot_not_permitted, "cannot read " + dir + ": " + std::strerror(errno)};
        return "";
    }
    if (!S_ISDIR(d.st_mode) || d.st_uid != uid || (d.st_mode & 077) != 0)
        throw Failed{snapshot_not_written, dir + " is not a directory of the process's user alone (uid " +
                                               std::to_string(d.st_uid) + "): refusing to read an answer there"};
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return "";
        if (errno == EACCES) throw Failed{snapshot_not_permitted, "cannot read " + path + ": " + std::strerror(errno)};
        throw Failed{snapshot_not_written, path + ": " + std::strerror(errno)};
    }
    struct stat f {};
    std::string text;
    if (::fstat(fd, &f) == 0 && S_ISREG(f.st_mode) && f.st_uid == uid && f.st_nlink == 1 && f.st_size < (64 << 10)) {
        text.resize(static_cast<std::size_t>(f.st_size));
        if (::read(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) text.clear();
    }
    ::close(fd);
    if (text.empty())
        throw Failed{snapshot_not_written, path + " is not an answer the process's user wrote (uid " + std::to_string(f.st_uid) +
                                               ", " + std::to_string(f.st_nlink) + " names)"};
    return text;
}

// Waits for the answer file, as the process sees its /tmp; returns the report's path.
std::string answer(long pid, std::uint64_t number, double timeout_s) {
    struct stat owner {};
    if (::stat(proc(pid).c_str(), &owner) != 0) throw Failed{snapshot_no_process, "process " + std::to_string(pid) + " exited"};
    const std::string dir = proc(pid, "/root") + live::answer_dir(owner.st_uid);
    const std::string path = proc(pid, "/root") + live::answer_path(owner.st_uid, number);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
        if (const std::string text = answer_text(dir, path, owner.st_uid); !text.empty()) {
            ::unlink(path.c_str());
            nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
            if (j.is_discarded()) throw Failed{snapshot_not_written, path + ": not JSON"};
            if (j.contains("report") && j["report"].is_string()) return j["report"].get<std::string>();
            throw Failed{snapshot_not_written, "process " + std::to_string(pid) + " could not write its report: " +
                                                   (j.contains("error") && j["error"].is_string() ? j["error"].get<std::string>() : "(no reason given)")};
        }
        if (!alive(pid)) throw Failed{snapshot_no_process, "process " + std::to_string(pid) + " exited before it answered"};
        if (std::chrono::steady_clock::now() >= give_up)
            throw Failed{snapshot_no_answer, fmt::format("no answer from process {} within {} s (a first report symbolizes its "
                                                         "sites and may take longer: --timeout)", pid, timeout_s)};
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

// Where the process is heading, on stderr: stdout stays the report's path alone, for scripts. The path is as
// the process sees its file system (a container's may differ): read through its root.
void print_forecasts(long pid, const std::string& path) {
    try {
        const std::string seen = !path.empty() && path[0] == '/' ? proc(pid, "/root") + path : path;
        for (const report::Forecast& f : report::load(seen).forecasts) error("forecast: {}\n", report::forecast_line(f));
    } catch (const std::exception& e) {
        error("the report was written but cannot be read back: {}\n", e.what());
    }
}

}  // namespace

int snapshot_command(long pid, double timeout_s) {
    try {
        if (::kill(static_cast<pid_t>(pid), 0) != 0) {
            if (errno == EPERM)
                throw Failed{snapshot_not_permitted, "not permitted to signal process " + std::to_string(pid) + " (another user's)"};
            throw Failed{snapshot_no_process, "no process " + std::to_string(pid)};
        }
        const long tid = checkpoint_thread(pid);
        const std::uint64_t number = request_number();
        ask(pid, tid, number);
        const std::string path = answer(pid, number, timeout_s);
        say(stdout, "{}\n", path);
        std::fflush(stdout);
        print_forecasts(pid, path);
        return snapshot_written;
    } catch (const Failed& f) {
        error("{}\n", f.message);  // "cumemaudit snapshot: " as every command's errors
        return f.code;
    }
}

}  // namespace cumemaudit::cli
