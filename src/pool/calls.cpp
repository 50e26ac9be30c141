// Driver call accounting: names, snapshots, the process-wide counter.
#include "driver.hpp"

namespace cumemaudit::pool {

const char* api_name(Api api) noexcept {
    switch (api) {
        case Api::granularity: return "cuMemGetAllocationGranularity";
        case Api::create: return "cuMemCreate";
        case Api::release: return "cuMemRelease";
        case Api::address_reserve: return "cuMemAddressReserve";
        case Api::address_free: return "cuMemAddressFree";
        case Api::map: return "cuMemMap";
        case Api::unmap: return "cuMemUnmap";
        case Api::set_access: return "cuMemSetAccess";
        case Api::export_handle: return "cuMemExportToShareableHandle";
        case Api::import_handle: return "cuMemImportFromShareableHandle";
        case Api::count_: break;
    }
    return "?";
}

std::uint64_t CallCounts::total() const noexcept {
    std::uint64_t t = 0;
    for (auto v : n) t += v;
    return t;
}

CallCounts CallCounts::operator-(const CallCounts& earlier) const noexcept {
    CallCounts d;
    for (std::size_t i = 0; i < kApiCount; ++i) d.n[i] = n[i] - earlier.n[i];
    return d;
}

CallCounts CallCounter::snapshot() const noexcept {
    CallCounts c;
    for (std::size_t i = 0; i < kApiCount; ++i) c.n[i] = n_[i].load(std::memory_order_relaxed);
    return c;
}

namespace detail {
CallCounter& process_counter() noexcept {
    static CallCounter counter;  // constant-initialised atomics: usable from any static constructor
    return counter;
}
}  // namespace detail

CallCounts global_call_counts() noexcept { return detail::process_counter().snapshot(); }

std::size_t granularity(int device, HandleKind kind, CallCounter* counter) {
    const CUmemAllocationProp p = detail::allocation_prop(device, kind);
    std::size_t g = 0;
    detail::check(detail::call(Api::granularity, counter,
                               [&] { return cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED); }),
                  Api::granularity);
    return g;
}

}  // namespace cumemaudit::pool
