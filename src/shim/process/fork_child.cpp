#include "shim/process/fork_child.hpp"

#include "shim/process/auditor.hpp"
#include "shim/record/order_stripe.hpp"
#include "shim/services/log.hpp"
#include "shim/services/python_stack.hpp"
#include "shim/services/thread_state.hpp"

#include <pthread.h>

namespace cumemaudit::shim {

void in_fork_child() noexcept {
    // thread_state: the list of counted threads and its mutex (only this thread is left), its counter at 0.
    reset_calls_after_fork();
    // This thread records into the fresh Recorder once its first CUDA call starts one.
    thread_state().recorder = nullptr;
    // order_stripe: a stripe a parent thread held across its driver call.
    reset_order_stripes_in_child();
    // log: the stderr sink's mutex; a fresh logger at the same level.
    reset_logger_in_child();
    // python_stack: the code cache's mutex.
    reset_python_cache_in_child();
    // auditor: the parent's Auditor and Recorder are left untouched, never locked or freed; the first CUDA
    // call builds a fresh one (ledger, timeline, OOM records, enforce table, report mutex, background thread).
    Auditor::note_fork_child();
}

namespace {
__attribute__((constructor)) void register_fork_child() { pthread_atfork(nullptr, nullptr, [] { in_fork_child(); }); }
}  // namespace

}  // namespace cumemaudit::shim
