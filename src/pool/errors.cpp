// PoolError and the release error path destructors use (they must not throw).
#include "driver.hpp"

#include <atomic>
#include <string>

namespace cumemaudit::pool {
namespace {

std::atomic<ReleaseErrorHandler> g_handler{nullptr};
std::atomic<std::uint64_t> g_errors{0};

std::string describe(CUresult result, const char* api) {
    const char* name = nullptr;
    // cuGetErrorName is not counted: it costs nothing and changes no state.
    if (cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) name = "unknown CUresult";
    return std::string(api) + " failed: " + name + " (" + std::to_string(static_cast<int>(result)) + ")";
}

}  // namespace

PoolError::PoolError(CUresult result, const char* api) : std::runtime_error(describe(result, api)), result_(result), api_(api) {}

void set_release_error_handler(ReleaseErrorHandler handler) noexcept { g_handler.store(handler); }
std::uint64_t release_error_count() noexcept { return g_errors.load(); }

namespace detail {

void check(CUresult result, Api api) {
    if (result != CUDA_SUCCESS) throw PoolError(result, api_name(api));
}

bool report(CUresult result, Api api) noexcept {
    if (result == CUDA_SUCCESS) return true;
    g_errors.fetch_add(1);
    if (auto h = g_handler.load()) h(result, api_name(api));
    return false;
}

CUmemAllocationProp allocation_prop(int device, HandleKind kind) noexcept {
    CUmemAllocationProp p{};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = device;
    p.requestedHandleTypes = to_cu(kind);
    return p;
}

}  // namespace detail

CUmemAllocationHandleType to_cu(HandleKind kind) noexcept {
    return kind == HandleKind::fabric ? CU_MEM_HANDLE_TYPE_FABRIC : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
}

}  // namespace cumemaudit::pool
