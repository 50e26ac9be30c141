// fence: the C boundary. Every function a program, the driver or CUPTI calls into is noexcept and runs
// the shim's own work through guarded(): an exception (an allocation that failed, a bug) stops there, one
// warning says so, and the call goes on as if it were not audited. The program gets the driver's answer,
// bit for bit, and never sees an unwind through C frames (docs/ARCHITECTURE.md, "The data path").
#pragma once

#include "shim/services/no_cancel.hpp"

#include <exception>

namespace cumemaudit::shim {

// Says once per process that bookkeeping failed at `where` (an API name) and why; later failures only count.
void bookkeeping_failed(const char* where, const char* what) noexcept;

// Runs f; false when it threw (after bookkeeping_failed).
template <typename F>
bool guarded(const char* where, F&& f) noexcept {
    try {
        f();
        return true;
    } catch (const std::exception& e) {
        bookkeeping_failed(where, e.what());
    } catch (...) {
        bookkeeping_failed(where, "an exception of unknown type");
    }
    return false;
}

// The whole body of a C entry point of the shim's own (the C API): cancellation held off (no_cancel.hpp),
// then guarded().
template <typename F>
bool entered(const char* where, F&& f) noexcept {
    NoCancel held;
    return guarded(where, f);
}

}  // namespace cumemaudit::shim
