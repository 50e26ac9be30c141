#include "shim/services/own_stack.hpp"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <memory>

namespace cumemaudit::shim {
namespace {

// Room for the deepest work a report does, with margin: virtual memory, touched only as far as used.
constexpr std::size_t kStackBytes = 16u << 20;

struct Job {
    std::function<void()> work;
    std::atomic<bool> done{false};
};

void* run(void* arg) {
    // The thread owns one reference; the caller may have stopped waiting and dropped its own.
    std::unique_ptr<std::shared_ptr<Job>> job(static_cast<std::shared_ptr<Job>*>(arg));
    (*job)->work();
    (*job)->done.store(true, std::memory_order_release);
    return nullptr;
}

}  // namespace

Ran run_on_own_stack(std::function<void()> work, std::chrono::milliseconds bound) {
    auto job = std::make_shared<Job>();
    job->work = std::move(work);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, kStackBytes);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    // Signals belong to the program's threads: made with every one blocked.
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &before);
    pthread_t thread;
    auto* ref = new std::shared_ptr<Job>(job);
    const int made = pthread_create(&thread, &attr, &run, ref);
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    pthread_attr_destroy(&attr);
    if (made != 0) {
        delete ref;
        job->work();  // no thread to be had: on this stack, as before
        return Ran::done;
    }
    // Polled rather than a timed wait: pthread_cond_clockwait is glibc 2.30, above the 2.28 floor.
    const timespec tick{0, 1'000'000};
    for (std::int64_t waited = 0; !job->done.load(std::memory_order_acquire); ++waited) {
        if (waited >= bound.count()) return Ran::timed_out;
        nanosleep(&tick, nullptr);
    }
    return Ran::done;
}

}  // namespace cumemaudit::shim
