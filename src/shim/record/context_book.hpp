// context_book: the contexts the program made, and what each reserves on its device besides allocations —
// the fixed part its creation cost (what NVML charged this process for it, less the kernel stack it began
// with), what its streams' creations took (measured around each), its kernel stack reservation (its CU_LIMIT_STACK_SIZE × the threads the device holds, which a
// launch raises to what a kernel's local memory needs and keeps: docs/DRIVER.md, "Contexts, kernel stacks
// and launches") and its device heap (measured at the launch that reserved it); and who last set a
// context's stack limit. Asked at marks and out-of-memory moments only.
#pragma once

#include "history/types.hpp"
#include "shim/services/cuda_api.hpp"

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace cumemaudit::shim {

class ContextBook {
public:
    // A context began (a primary context that was inactive, retained; or one created). `charged_before` and
    // `charged_after` are NVML's figure for this process around the creation; `measured` false when NVML
    // could not say after it (the fixed part is then left unattributed).
    void made(CUcontext ctx, int device, bool primary, bool measured, std::uint64_t charged_before,
              std::uint64_t charged_after, history::Context made);
    // A context ended: forgotten, and with a primary context the green contexts destroyed on its device.
    void ended(CUcontext ctx);
    // A green context destroyed: the driver keeps what its creation took, so its fixed part stays booked.
    void green_destroyed(CUcontext green);
    void stack_set(CUcontext ctx, std::uint64_t bytes_per_thread, const ledger::Site& site);
    // A launch of `kernel` at `site` reserved the device heap of `ctx`, `bytes` (once: the driver reserves it
    // at most once a context).
    void heap_reserved(CUcontext ctx, std::uint64_t bytes, std::string kernel, const ledger::Site& site);
    // A stream made in `ctx`, whose creation took `bytes` of device memory at `site` (0: it fit room the
    // context held). Part of the context's reservation from then on: the driver gives none back at a destroy.
    void stream_made(CUcontext ctx, std::uint64_t bytes, const ledger::Site& site);

    // What `device`'s live contexts reserve now (every device's: -1), asking the driver for their stacks
    // (marks and out-of-memory moments).
    struct Reserved {
        std::uint64_t context_bytes = 0, local_memory_bytes = 0, stack_bytes_per_thread = 0;
        std::uint64_t malloc_heap_bytes = 0;
    };
    // `stack_gone`: a context whose stack the driver gave back (it does so when it refuses a launch for want
    // of stack: docs/DRIVER.md), counted without it.
    Reserved reserved(int device, CUcontext stack_gone = nullptr);
    // The live contexts, their stacks as the driver last said (a report asks the driver nothing).
    void copy_to(std::vector<history::Context>& out) const;

private:
    struct Live {
        CUcontext ctx;
        history::Context facts;
    };
    std::vector<Live> live_now(CUcontext stack_gone);
    mutable std::mutex mu_;
    std::vector<Live> live_;  // a program makes a few; bounded by history::kContextsKept
};

}  // namespace cumemaudit::shim
