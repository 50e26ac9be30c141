// live_request: how `cumemaudit snapshot` asks a running process for its report, shared by the shim (which
// answers) and the CLI (which asks). docs/LIVE.md says why it is built this way.
//
// The request is one real-time signal sent to the shim's checkpoint thread alone (a thread-directed
// signal, found by the thread's name): that thread blocks every signal and takes this one with
// sigtimedwait, so no handler is ever installed for it and the program's own disposition of the same number
// is never used or changed. It carries a random request number (sigqueue's value); the answer is a small
// file named by that number in the process's /tmp, which the CLI reads through /proc/PID/root.
#pragma once

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <string>

namespace cumemaudit::live {

// The name of the shim's checkpoint thread, as /proc/PID/task/TID/comm shows it.
inline constexpr const char* kCheckpointThreadName = "cumemaudit";

// The signal the checkpoint thread waits for: a request from outside, or a wake from inside the process.
// SIGRTMIN is glibc's first free real-time signal (its own threads' two come before it).
inline int request_signal() { return SIGRTMIN + 6; }

// A request's number carries this mark in its top 16 bits, the rest random: with the sender's pid (not the
// process's own), it tells a request of `cumemaudit snapshot` from a signal of the same number the program
// queued for itself, which the thread hands back untouched.
inline constexpr std::uint64_t kRequestMark = 0xC0DAull << 48;
inline std::uint64_t request_number(std::uint64_t random) { return kRequestMark | (random & ((1ull << 48) - 1)); }
inline bool is_request_number(std::uint64_t n) { return (n >> 48) == (kRequestMark >> 48); }

// Where answers are written, as the process sees its file system: a directory of its user's alone (0700,
// made by the shim, checked by both sides), so no other user can see an answer's temporary name, plant a
// file or a link under an answer's name, or swap one.
inline std::string answer_dir(unsigned uid) { return "/tmp/cumemaudit-" + std::to_string(uid); }

// The answer to request `number` of a process run by `uid`.
inline std::string answer_path(unsigned uid, std::uint64_t number) {
    char name[40];
    std::snprintf(name, sizeof name, "/snapshot.%016llx", static_cast<unsigned long long>(number));
    return answer_dir(uid) + name;
}

}  // namespace cumemaudit::live
