// The C API of include/cumemaudit/cumemaudit.h. Programs may call it without linking us (dlsym with
// RTLD_DEFAULT finds it when the shim is preloaded); before any CUDA call there is nothing to report, so
// these do nothing then: a process that never touches CUDA starts no thread and writes no report.
#include "cumemaudit/cumemaudit.h"

#include "auditor.hpp"

using cumemaudit::shim::Auditor;

extern "C" {

__attribute__((visibility("default"))) void cumemaudit_checkpoint(void) {
    if (Auditor::started() && Auditor::enter()) Auditor::get().checkpoint("cumemaudit_checkpoint()");
}

__attribute__((visibility("default"))) void cumemaudit_step(uint64_t step) {
    if (Auditor::started() && Auditor::enter()) Auditor::get().step(step, nullptr);
}

__attribute__((visibility("default"))) void cumemaudit_mark(const char* label) {
    if (Auditor::started() && Auditor::enter()) Auditor::get().step(0, label != nullptr && *label != '\0' ? label : "mark");
}

__attribute__((visibility("default"))) void cumemaudit_torch_step(uint64_t step, uint64_t allocated, uint64_t reserved) {
    if (Auditor::started() && Auditor::enter()) Auditor::get().step(step, nullptr, allocated, reserved);
}

}
