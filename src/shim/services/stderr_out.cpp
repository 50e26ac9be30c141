#include "shim/services/stderr_out.hpp"

#include "report/terminal_safe.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

namespace cumemaudit::shim {
namespace {

struct StartStderr {
    bool open = false;
    dev_t dev = 0;
    ino_t ino = 0;
};
StartStderr g_start;

// At library load, before the program can close or reuse fd 2.
__attribute__((constructor)) void note_stderr_at_start() {
    struct stat st {};
    if (fstat(STDERR_FILENO, &st) == 0) g_start = StartStderr{true, st.st_dev, st.st_ino};
}

bool stderr_is_ours() {
    struct stat st {};
    return g_start.open && fstat(STDERR_FILENO, &st) == 0 && st.st_dev == g_start.dev && st.st_ino == g_start.ino;
}

bool pending(int sig) {
    sigset_t set;
    sigemptyset(&set);
    return sigpending(&set) == 0 && sigismember(&set, sig) == 1;
}

void take_back(int sig) {
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    const timespec zero{0, 0};
    while (sigtimedwait(&one, nullptr, &zero) == sig) {
    }
}

void write_all(const char* p, std::size_t n) {
    while (n > 0) {
        const ssize_t w = write(STDERR_FILENO, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;  // EPIPE, EFBIG, ENOSPC, a closed fd: the line is dropped, never the program
        p += w;
        n -= static_cast<std::size_t>(w);
    }
}

}  // namespace

QuietWrites::QuietWrites() noexcept {
    sigset_t quiet;
    sigemptyset(&quiet);
    sigaddset(&quiet, SIGPIPE);
    sigaddset(&quiet, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &quiet, &saved_);
    pipe_pending_ = pending(SIGPIPE);
    fsize_pending_ = pending(SIGXFSZ);
}

QuietWrites::~QuietWrites() {
    const int saved_errno = errno;
    if (!pipe_pending_ && pending(SIGPIPE)) take_back(SIGPIPE);
    if (!fsize_pending_ && pending(SIGXFSZ)) take_back(SIGXFSZ);
    pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
    errno = saved_errno;
}

void write_stderr_raw(const char* text, std::size_t n) noexcept {
    const int saved_errno = errno;
    if (stderr_is_ours()) {
        QuietWrites quiet;
        write_all(text, n);
    }
    errno = saved_errno;
}

void write_stderr(std::string_view text) noexcept {
    const int saved_errno = errno;
    if (stderr_is_ours()) {
        QuietWrites quiet;
        // Escaped piece by piece through a buffer on the stack: nothing allocated, so the line still goes out
        // when memory is short (the fence's warning).
        struct Buffer {
            char data[512];
            std::size_t n = 0;
            void flush() {
                write_all(data, n);
                n = 0;
            }
        } buf;
        report::terminal_safe_to(
            text,
            [](void* b, const char* d, std::size_t n) {
                auto& out = *static_cast<Buffer*>(b);
                while (n > 0) {
                    if (out.n == sizeof out.data) out.flush();
                    const std::size_t k = std::min(n, sizeof out.data - out.n);
                    std::memcpy(out.data + out.n, d, k);
                    out.n += k;
                    d += k;
                    n -= k;
                }
            },
            &buf);
        buf.flush();
    }
    errno = saved_errno;
}

}  // namespace cumemaudit::shim
