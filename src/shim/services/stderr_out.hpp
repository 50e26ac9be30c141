// stderr_out: the shim's one way to the program's stderr. Whatever the shim prints goes through here:
// - only to the file fd 2 was when the library loaded (its device and inode): a daemon that closed its
//   fds and reused 2 for a data file never finds the shim's lines in it;
// - with SIGPIPE and SIGXFSZ held back for the write (a reader that went away, a file-size limit): the
//   write fails with EPIPE or EFBIG instead of the signal killing the program, and a signal the write
//   raised is taken back before the mask is restored;
// - escaped for a terminal (report/terminal_safe.hpp): program strings cannot inject control sequences.
#pragma once

#include <cstddef>
#include <string_view>

#include <signal.h>

namespace cumemaudit::shim {

// Holds SIGPIPE and SIGXFSZ back on this thread while it lives (any write of the shim's: stderr, reports,
// metrics); those the scope's writes raised are discarded at its end, others stay pending.
class QuietWrites {
public:
    QuietWrites() noexcept;
    ~QuietWrites();
    QuietWrites(const QuietWrites&) = delete;
    QuietWrites& operator=(const QuietWrites&) = delete;

private:
    sigset_t saved_{};
    bool pipe_pending_ = false, fsize_pending_ = false;
};

// Writes `text`, escaped for a terminal, to stderr if it is still the file it was at start.
void write_stderr(std::string_view text) noexcept;
// The same for a constant message, with no allocation and no escaping (the fence's last word).
void write_stderr_raw(const char* text, std::size_t n) noexcept;

}  // namespace cumemaudit::shim
