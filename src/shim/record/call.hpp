// call: what one recorded call knows about itself — the Recorder it records into, which API and caller it is
// attributed to (the runtime's caller when cudart made the driver call for it), and, computed only when an
// event needs it, its Site: the interned stack and the owner.
#pragma once

#include "ledger/ledger.hpp"
#include "shim/record/declaration.hpp"
#include "shim/services/thread_state.hpp"

namespace cumemaudit::shim {

class Recorder;

class Call {
public:
    // A runtime wrapper on this thread's stack names the call: cudart's caller and API, not cudart's.
    Call(Recorder& recorder, const char* api, void* caller, CallClass cls = CallClass::classic)
        : recorder_(recorder), api_(api), caller_(caller), class_(cls) {
        const ThreadState& t = thread_state();
        if (t.runtime_api != nullptr) [[unlikely]] {
            api_ = t.runtime_api;
            caller_ = t.runtime_caller;
        }
    }
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

    Recorder& recorder() const { return recorder_; }
    const char* api() const { return api_; }
    // The site of this call: captured (stack_depth, or vmm_stack_depth at VMM calls, frames from the caller
    // outwards, then the Python frames where python_frames asks) and interned on first use, so events that
    // need none (a successful free) cost nothing for it.
    const ledger::Site& site();
    // The site as a VMM call takes it, whatever this call's class (vmm_stack_depth, Python frames unless
    // python_frames=none), not kept: for a rare moment that deserves the whole stack, an out-of-memory
    // refusal, whose reader wants the Python line more than a classic call's one return address.
    ledger::Site full_site();
    // A site with the API only, for events whose site the ledger does not keep.
    ledger::Site bare() const { return ledger::Site{api_, 0, 0}; }
    // A classic free's ticket for its record, taken before the driver ran (Ledger::freeing).
    ledger::Ledger::FreeTicket free_ticket = 0;

private:
    ledger::Site capture_site(bool vmm, bool python);

    Recorder& recorder_;
    const char* api_;
    void* caller_;
    CallClass class_;
    bool have_site_ = false;
    ledger::Site site_;
};

}  // namespace cumemaudit::shim
