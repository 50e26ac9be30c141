#include "shim/process/checkpoint_thread.hpp"

#include "shim/process/snapshot_answer.hpp"
#include "shim/record/marking.hpp"
#include "shim/services/driver_query.hpp"
#include "shim/services/log.hpp"
#include "shim/services/thread_state.hpp"
#include "common/live_request.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <ctime>
#include <system_error>
#include <thread>
#include <vector>

namespace cumemaudit::shim {

CheckpointThread::CheckpointThread(Recorder& rec, ReportWriter& writer)
    : recorder_(rec), writer_(writer), options_(rec.options()), program_context_(current_context()) {}

void CheckpointThread::start() {
    // Signals belong to the program's threads. The thread is made with every signal blocked, not blocked
    // by its own first lines: a SIGTERM that came in between ran our handler on this very thread, which
    // then waited its whole bound for the report it was to write itself, and none was written.
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &before);
    try {
        std::thread([this] { loop(); }).detach();
        started_.store(true);
    } catch (const std::system_error& e) {
        // No thread may be made here (a process limit, a seccomp filter): the audit records and writes
        // its exit report and keeps the gate without it.
        log_warning("no checkpoint thread ({}): periodic reports, samples, SIGUSR2 marks and `cumemaudit "
                    "snapshot` are off; the exit report and the gate are not",
                    e.what());
    }
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    // The thread names itself and attaches as its first lines.
    for (int i = 0; i < 21'000 && started_.load() && !wakeup_.attached(); ++i) {
        if (i < 1000)
            sched_yield();
        else
            usleep(100);
    }
}

void CheckpointThread::request_mark() {
    if (!started_.load()) return;
    marks_asked_.fetch_add(1);
    wakeup_.notify();
}

void CheckpointThread::request_report(bool summary, int wait_ms, int signal) {
    if (!started_.load()) return;  // nobody to write it: the program's own disposition follows at once
    // The flags are set before the request is counted: a request counted in `asked` shows them.
    if (signal != 0) ending_signal_.store(signal);
    if (summary) summary_asked_.store(true);
    const std::uint64_t mine = requests_.fetch_add(1) + 1;
    wakeup_.notify();
    timespec tick{0, 2'000'000};
    for (int i = 0; i < wait_ms / 2 && served_.load() < mine; ++i) nanosleep(&tick, nullptr);
}

int CheckpointThread::request_exit_report(int status, int wait_ms) {
    if (!started_.load()) return -1;
    exit_status_.store(status);
    exit_asked_.store(true);
    wakeup_.notify();
    timespec tick{0, 2'000'000};
    for (int i = 0; i < wait_ms / 2 && exit_verdict_.load() < 0; ++i) nanosleep(&tick, nullptr);
    return exit_verdict_.load();
}

void CheckpointThread::sample(const char* label) {
    ShimScope busy;
    mark_now(recorder_, MarkRequest{0, label, 0, 0, {}, program_context_.load()});
}

void CheckpointThread::loop() {
    // Named, so `cumemaudit snapshot` finds the thread to ask (its requests are signals to this thread alone).
    // prctl, not pthread_setname_np: that is GLIBC_2.34, above the 2.28 floor.
    prctl(PR_SET_NAME, live::kCheckpointThreadName, 0, 0, 0);
    wakeup_.attach_waiter();
    using Clock = std::chrono::steady_clock;
    const auto every = [](int n, int unit_ms) { return std::chrono::milliseconds(std::int64_t{n} * unit_ms); };
    auto next_report = Clock::now() + every(options_.checkpoint_s, 1000);
    auto next_sample = Clock::now() + every(options_.sample_ms, 1);
    std::uint64_t marks_seen = 0;
    std::uint32_t woken = 0;  // from zero: a request made before this thread first ran is not missed
    std::vector<OutsideRequest> outside;
    for (;;) {
        auto wake = Clock::time_point::max();
        if (options_.checkpoint_s > 0) wake = std::min(wake, next_report);
        if (options_.sample_ms > 0) wake = std::min(wake, next_sample);
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now()).count();
        // Asked already (a signal may come before this thread first runs): no sleep.
        if (requests_.load() == served_.load() && marks_asked_.load() == marks_seen && !exit_asked_.load())
            woken = wakeup_.wait(woken, wake == Clock::time_point::max() ? -1 : static_cast<long>(std::max<std::int64_t>(left, 0)),
                                 outside);
        else
            woken = wakeup_.count();
        if (exit_asked_.load()) {  // the process ends next: nothing else is worth doing
            const int status = exit_status_.load();
            exit_verdict_.store(writer_.exit_verdict(status) & 0xff);
            for (;;) pause();  // this thread's work is done; the asking thread ends the process
        }
        const auto now = Clock::now();
        if (const std::uint64_t asked = marks_asked_.load(); asked != marks_seen) {
            marks_seen = asked;
            sample("SIGUSR2");
        }
        if (options_.sample_ms > 0 && now >= next_sample) {
            sample("sample");
            next_sample = now + every(options_.sample_ms, 1);
        }
        const std::uint64_t asked = requests_.load();
        if (asked != served_.load() || !outside.empty() || (options_.checkpoint_s > 0 && now >= next_report)) {
            const bool summary = asked != served_.load() && summary_asked_.exchange(false);
            if (summary) writer_.name_ending_signal(ending_signal_.load());
            if (!outside.empty()) log_info("report written (asked by process {})", outside.front().sender);
            const ReportWriter::Saved saved = writer_.write_here(ledger::Moment::checkpoint, nullptr,
                                                            summary ? ReportWriter::Then::summary : ReportWriter::Then::nothing);
            served_.store(asked);
            for (const OutsideRequest& r : outside)
                if (r.number != 0) answer_snapshot(r.number, saved.path, saved.error);
            outside.clear();
            next_report = now + every(options_.checkpoint_s, 1000);
        }
    }
}

}  // namespace cumemaudit::shim
