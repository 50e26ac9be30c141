// The C API of include/cumemaudit/cumemaudit.h. Programs may call it without linking us (dlsym with
// RTLD_DEFAULT finds it when the shim is preloaded); before any CUDA call there is nothing to report.
#include "cumemaudit/cumemaudit.h"

#include "auditor.hpp"
#include "oom.hpp"

using cumemaudit::shim::Auditor;

extern "C" {

__attribute__((visibility("default"))) void cumemaudit_checkpoint(void) {
    if (Auditor::enter()) Auditor::get().checkpoint("cumemaudit_checkpoint()");
}

__attribute__((visibility("default"))) void cumemaudit_step(uint64_t step) {
    if (Auditor::enter()) Auditor::get().step(step, nullptr);
}

__attribute__((visibility("default"))) void cumemaudit_mark(const char* label) {
    if (Auditor::enter()) Auditor::get().step(0, label != nullptr && *label != '\0' ? label : "mark");
}

__attribute__((visibility("default"))) void cumemaudit_torch_step(uint64_t step, uint64_t allocated, uint64_t reserved) {
    if (Auditor::enter()) Auditor::get().step(step, nullptr, allocated, reserved);
}

}

extern "C" {

__attribute__((visibility("default"))) void cumemaudit_torch_pool(const char* pool, uint64_t allocated, uint64_t reserved) {
    if (!Auditor::enter()) return;
    Auditor::get().oom_log().stage_pool({pool != nullptr ? pool : "", allocated, reserved,
                                         reserved > allocated ? reserved - allocated : 0});
}

__attribute__((visibility("default"))) void cumemaudit_torch_oom(uint64_t requested_bytes) {
    if (Auditor::enter()) cumemaudit::shim::torch_out_of_memory(requested_bytes);
}

}
