#include "shim/boundary/fence.hpp"

#include "shim/services/log.hpp"
#include "shim/services/stderr_out.hpp"

#include <atomic>

namespace cumemaudit::shim {

void bookkeeping_failed(const char* where, const char* what) noexcept {
    static std::atomic<bool> warned{false};
    if (warned.exchange(true)) return;
    try {
        log_warning("bookkeeping of {} failed ({}); this call and any other whose bookkeeping fails pass through "
                    "unrecorded, so the report may miss them (warned once)",
                    where, what);
    } catch (...) {
        // The logger itself could not allocate: say it without it.
        static const char msg[] = "cumemaudit warning: bookkeeping failed; calls whose bookkeeping fails pass "
                                  "through unrecorded (warned once)\n";
        write_stderr_raw(msg, sizeof msg - 1);
    }
}

}  // namespace cumemaudit::shim
