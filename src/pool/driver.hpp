// driver: the one way this library calls the CUDA driver. Every call is counted (process-wide and, when
// given, into the caller's CallCounter) so a pattern's cost in driver calls can be reported, and failures
// become PoolError in factories or a reported error in destructors, never an exception there.
#pragma once

#include "cumemaudit/fabric_pool.hpp"

namespace cumemaudit::pool::detail {

CallCounter& process_counter() noexcept;

// Counts `api` and returns what the driver returned.
template <class F>
CUresult call(Api api, CallCounter* counter, F&& f) {
    process_counter().add(api);
    if (counter != nullptr) counter->add(api);
    return f();
}

// Throws PoolError unless success (factories).
void check(CUresult result, Api api);
// Counts and hands to the release error handler unless success (destructors); true on success.
bool report(CUresult result, Api api) noexcept;

CUmemAllocationProp allocation_prop(int device, HandleKind kind) noexcept;

}  // namespace cumemaudit::pool::detail
