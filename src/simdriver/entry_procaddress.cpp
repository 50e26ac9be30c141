// cuGetProcAddress (v1) and cuGetProcAddress_v2: resolve (base name, version, flags) with the shared
// catalog (common/cuda_catalog.inc) and return the address of the variant it names. The name->address
// map comes from the same .inc, so every row the catalog resolves to is a function defined here.
#include "common/cuda_catalog.hpp"
#include "entry_guard.hpp"

#include <string_view>

namespace {

struct Symbol {
    std::string_view name;
    void* address;
};

// `none` in the per-thread column is this object; its address is filtered out below.
constexpr int none = 0;
template <typename Fn>
void* address_of(Fn* f) { return reinterpret_cast<void*>(f); }
void* address_of(const int*) { return nullptr; }

const Symbol kSymbols[] = {
#define CU_ENTRY(base, version, symbol, twin) {#symbol, address_of(&symbol)}, {#twin, address_of(&twin)},
#include "common/cuda_catalog.inc"
#undef CU_ENTRY
};

void* address(std::string_view name) {
    for (const auto& s : kSymbols)
        if (s.address != nullptr && s.name == name) return s.address;
    return nullptr;
}

CUresult lookup(const char* symbol, void** pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
    if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if ((flags & ~cuuint64_t{CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM}) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    using cumemaudit::catalog::Lookup;
    const auto res = cumemaudit::catalog::resolve(symbol, version, flags);
    void* fn = res.status == Lookup::found ? address(res.symbol) : nullptr;
    *pfn = fn;
    if (status != nullptr) {
        *status = fn != nullptr                          ? CU_GET_PROC_ADDRESS_SUCCESS
                  : res.status == Lookup::version_too_low ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                                          : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    }
    return fn != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

}  // namespace

// Works before cuInit: cudart gets cuInit itself through here.
extern "C" {

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
    return cumemaudit::sim::guarded([&] { return lookup(symbol, pfn, cudaVersion, flags, nullptr); });
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus) {
    return cumemaudit::sim::guarded([&] { return lookup(symbol, pfn, cudaVersion, flags, symbolStatus); });
}

}  // extern "C"
