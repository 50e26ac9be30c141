// bench_common: what the two benchmark programs share — the clock, a table printed aligned or as
// markdown, and running this same binary again as a child with the shim on or off, so every figure of a
// table comes from one run of one binary, side by side. Nothing here asserts a time: benchmarks print.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace bench {

inline double now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

[[noreturn]] inline void die(const char* what) {
    std::fprintf(stderr, "bench: FAILED: %s\n", what);
    std::exit(2);
}

inline const char* env_or(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : fallback;
}

// How a child runs: without the shim, or preloaded with these CUMEMAUDIT_OPTIONS.
struct Mode {
    std::string name;     // column header: "off", "on", "on32"
    bool shim = false;
    std::string options;  // CUMEMAUDIT_OPTIONS (report_dir is added by run_child)
    bool null_driver = false;  // tests/bench/nulldrv's libcuda.so.1 instead of the simulated one
    std::string preload;       // another library preloaded instead of this build's shim: the minimal recorder,
                               // or (with shim = true, options set) another build of the shim
};

// The shim and the simulated driver directory, from the environment meson's benchmark() and
// tests/bench/run set: CUMEMAUDIT_SHIM and CUMEMAUDIT_SIM_DIR.
struct Paths {
    std::string shim, sim_dir, report_dir;
    std::string null_dir;  // CUMEMAUDIT_NULL_DIR, optional
    std::string floor;     // CUMEMAUDIT_FLOOR, optional: tests/bench/floor's libminrec.so
};

inline Paths paths_from_env() {
    Paths p;
    p.shim = env_or("CUMEMAUDIT_SHIM", "");
    p.sim_dir = env_or("CUMEMAUDIT_SIM_DIR", "");
    p.null_dir = env_or("CUMEMAUDIT_NULL_DIR", "");
    p.floor = env_or("CUMEMAUDIT_FLOOR", "");
    if (p.shim.empty() || p.sim_dir.empty())
        die("set CUMEMAUDIT_SHIM (libcumemaudit.so) and CUMEMAUDIT_SIM_DIR (the simulated libcuda.so.1's directory)");
    char tmpl[] = "/tmp/cumemaudit-bench.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) die("mkdtemp");
    p.report_dir = tmpl;
    return p;
}

inline void remove_tree(const std::string& dir) {
    if (dir.rfind("/tmp/cumemaudit-bench.", 0) != 0) return;  // only what paths_from_env made
    const std::string cmd = "rm -rf '" + dir + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "bench: could not remove %s\n", dir.c_str());
}

struct ChildResult {
    std::string out;       // the child's stdout
    double exited_ns = 0;  // CLOCK_MONOTONIC when waitpid returned
    int status = 0;
    pid_t pid = 0;
};

// Runs argv (argv[0] = this program) with the simulated driver first on the library path, the shim
// preloaded or not, `extra_env` added; collects stdout (stderr passes through unless `quiet_stderr`).
// LD_PRELOAD is replaced, never appended to.
inline ChildResult run_child(const Paths& p, const Mode& m, const std::vector<std::string>& argv,
                             const std::vector<std::string>& extra_env = {}, bool quiet_stderr = false) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string kv = *e;
        if (kv.rfind("LD_PRELOAD=", 0) == 0 || kv.rfind("LD_LIBRARY_PATH=", 0) == 0 ||
            kv.rfind("CUMEMAUDIT_OPTIONS=", 0) == 0)
            continue;
        env.push_back(kv);
    }
    const char* old_lib = std::getenv("LD_LIBRARY_PATH");
    const std::string& driver_dir = m.null_driver ? p.null_dir : p.sim_dir;
    env.push_back("LD_LIBRARY_PATH=" + driver_dir + (old_lib != nullptr && *old_lib ? ":" + std::string(old_lib) : ""));
    if (m.shim) {
        env.push_back("LD_PRELOAD=" + (m.preload.empty() ? p.shim : m.preload));
        std::string opts = "report_dir=" + p.report_dir;
        if (!m.options.empty()) opts += ":" + m.options;
        env.push_back("CUMEMAUDIT_OPTIONS=" + opts);
    }
    if (!m.shim && !m.preload.empty()) env.push_back("LD_PRELOAD=" + m.preload);
    for (const auto& e : extra_env) env.push_back(e);

    std::vector<char*> cargv, cenv;
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
    cenv.push_back(nullptr);

    int pipefd[2];
    if (pipe(pipefd) != 0) die("pipe");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
    posix_spawn_file_actions_addclose(&fa, pipefd[0]);
    posix_spawn_file_actions_addclose(&fa, pipefd[1]);
    if (quiet_stderr) posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    if (posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, cargv.data(), cenv.data()) != 0) die("posix_spawn");
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[1]);
    ChildResult r;
    r.pid = pid;
    char buf[4096];
    for (;;) {
        const ssize_t n = read(pipefd[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        r.out.append(buf, static_cast<std::size_t>(n));
    }
    close(pipefd[0]);
    while (waitpid(pid, &r.status, 0) < 0 && errno == EINTR) {
    }
    r.exited_ns = now_ns();
    if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
        std::fprintf(stderr, "bench: child (%s) failed, status %d; its output:\n%s\n", m.name.c_str(), r.status,
                     r.out.c_str());
        std::exit(2);
    }
    return r;
}

// The summary figure `key` (e.g. "leaked_allocations") of the last report the shim wrote for child
// `pid` into p.report_dir (cumemaudit.<host>.<pid>.json), or -1 when there is none.
inline long long report_summary(const Paths& p, pid_t pid, const char* key) {
    const std::string cmd = "cat " + p.report_dir + "/cumemaudit.*." + std::to_string(pid) + ".json 2>/dev/null";
    std::FILE* f = popen(cmd.c_str(), "r");
    if (f == nullptr) return -1;
    std::string text;
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
    pclose(f);
    const std::string quoted = std::string("\"") + key + "\"";
    const std::size_t at = text.find(quoted);
    if (at == std::string::npos) return -1;
    const std::size_t colon = text.find(':', at + quoted.size());
    return colon == std::string::npos ? -1 : std::atoll(text.c_str() + colon + 1);
}

// Lines "KEY v1 v2 …" of a child's output, split on blanks.
inline std::vector<std::vector<std::string>> records(const std::string& out, const char* key) {
    std::vector<std::vector<std::string>> rows;
    std::size_t pos = 0;
    while (pos < out.size()) {
        std::size_t end = out.find('\n', pos);
        if (end == std::string::npos) end = out.size();
        const std::string line = out.substr(pos, end - pos);
        pos = end + 1;
        std::vector<std::string> f;
        std::size_t i = 0;
        while (i < line.size()) {
            while (i < line.size() && line[i] == ' ') ++i;
            std::size_t j = i;
            while (j < line.size() && line[j] != ' ') ++j;
            if (j > i) f.push_back(line.substr(i, j - i));
            i = j;
        }
        if (!f.empty() && f[0] == key) rows.emplace_back(f.begin() + 1, f.end());
    }
    return rows;
}

// A table printed with aligned columns, or as a markdown table (--markdown).
class Table {
public:
    explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
    void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

    void print(bool markdown, std::FILE* f = stdout) const {
        if (markdown) {
            line(f, header_, "| ", " | ", " |");
            std::vector<std::string> rule(header_.size(), "---");
            line(f, rule, "| ", " | ", " |");
            for (const auto& r : rows_) line(f, r, "| ", " | ", " |");
            return;
        }
        std::vector<std::size_t> w(header_.size(), 0);
        auto widen = [&](const std::vector<std::string>& r) {
            for (std::size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
        };
        widen(header_);
        for (const auto& r : rows_) widen(r);
        auto padded = [&](const std::vector<std::string>& r) {
            std::vector<std::string> out;
            for (std::size_t i = 0; i < r.size(); ++i) {
                std::string c = r[i];
                // Text columns left, figures right: a cell that starts with a digit, sign or '≤' is a figure.
                const bool num = !c.empty() && (std::isdigit(static_cast<unsigned char>(c[0])) || c[0] == '-' ||
                                                c[0] == '+' || c.rfind("≤", 0) == 0);
                const std::size_t len = display_width(c);
                const std::string pad(w[i] > len ? w[i] - len : 0, ' ');
                out.push_back(num && i + 1 != r.size() ? pad + c : c + pad);
            }
            return out;
        };
        line(f, padded(header_), "", "  ", "");
        std::size_t total = 0;
        for (auto x : w) total += x + 2;
        std::fprintf(f, "%s\n", std::string(total > 2 ? total - 2 : 0, '-').c_str());
        for (const auto& r : rows_) line(f, padded(r), "", "  ", "");
    }

private:
    // Columns count characters, not bytes ("≤" is three bytes, one column).
    static std::size_t display_width(const std::string& s) {
        std::size_t n = 0;
        for (unsigned char c : s) n += (c & 0xC0) != 0x80;
        return n;
    }
    static void line(std::FILE* f, const std::vector<std::string>& r, const char* open, const char* sep,
                     const char* close) {
        std::string s = open;
        for (std::size_t i = 0; i < r.size(); ++i) {
            if (i) s += sep;
            s += r[i];
        }
        s += close;
        while (!s.empty() && s.back() == ' ') s.pop_back();
        std::fprintf(f, "%s\n", s.c_str());
    }
    std::vector<std::string> header_;
    std::vector<std::vector<std::string>> rows_;
};

inline std::string fmt(const char* f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
}

inline bool has_flag(int argc, char** argv, const char* flag) {
    for (int i = 1; i < argc; ++i)
        if (std::strcmp(argv[i], flag) == 0) return true;
    return false;
}

inline const char* flag_value(int argc, char** argv, const char* flag, const char* fallback) {
    const std::size_t n = std::strlen(flag);
    for (int i = 1; i < argc; ++i) {
        if (std::strncmp(argv[i], flag, n) == 0 && argv[i][n] == '=') return argv[i] + n + 1;
        if (std::strcmp(argv[i], flag) == 0 && i + 1 < argc) return argv[i + 1];
    }
    return fallback;
}

}  // namespace bench
