// The C API of include/cumemaudit/cumemaudit.h. Programs may call it without linking us (dlsym with
// RTLD_DEFAULT finds it when the shim is preloaded); before any CUDA call there is nothing to report.
#include "cumemaudit/cumemaudit.h"

#include "auditor.hpp"
#include "fence.hpp"

using cumemaudit::shim::Auditor;
using cumemaudit::shim::guarded;

// Each body runs inside the fence (fence.hpp): the program calling these never sees an exception.

extern "C" {

__attribute__((visibility("default"))) void cumemaudit_checkpoint(void) {
    guarded("cumemaudit_checkpoint", [] {
        if (Auditor::enter()) Auditor::get().checkpoint("cumemaudit_checkpoint()");
    });
}

__attribute__((visibility("default"))) void cumemaudit_step(uint64_t step) {
    guarded("cumemaudit_step", [&] {
        if (Auditor::enter()) Auditor::get().step(step, nullptr);
    });
}

__attribute__((visibility("default"))) void cumemaudit_mark(const char* label) {
    guarded("cumemaudit_mark", [&] {
        if (Auditor::enter()) Auditor::get().step(0, label != nullptr && *label != '\0' ? label : "mark");
    });
}

__attribute__((visibility("default"))) void cumemaudit_torch_step(uint64_t step, uint64_t allocated, uint64_t reserved) {
    guarded("cumemaudit_torch_step", [&] {
        if (Auditor::enter()) Auditor::get().step(step, nullptr, allocated, reserved);
    });
}

}
