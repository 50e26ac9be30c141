// The hook table against everything derived from it: every row is exported by libcumemaudit.so under its
// name, found by the dlsym map, and reached through cuGetProcAddress (the catalog's answer for its base name
// and version maps back to the same row); every memory entry point of the catalog is wrapped.
#include "common/cuda_catalog.hpp"
#include "common/cuda_errors.hpp"
#include "shim/record/events.hpp"
#include "shim/boundary/hooks.hpp"

#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <set>
#include <string>

using namespace cumemaudit;
using shim::HookId;

namespace {
void* shim_handle() {
    static void* h = dlopen(SHIM_PATH, RTLD_NOW | RTLD_LOCAL);
    return h;
}
}  // namespace

TEST_CASE("every hook is exported by the preload library under its own name") {
    REQUIRE(shim_handle() != nullptr);
    for (std::size_t i = 0; i < shim::kHookCount; ++i) {
        const auto& info = shim::hook_info(static_cast<HookId>(i));
        INFO(info.symbol);
        CHECK(dlsym(shim_handle(), std::string(info.symbol).c_str()) != nullptr);
        CHECK(shim::find_hook(info.symbol) == static_cast<HookId>(i));
    }
}

TEST_CASE("every driver hook is a catalog variant, reached through cuGetProcAddress by base and version") {
    for (std::size_t i = 0; i < shim::kHookCount; ++i) {
        const auto& info = shim::hook_info(static_cast<HookId>(i));
        if (info.kind == shim::HookKind::runtime) continue;
        INFO(info.symbol);
        bool found = false;
        for (const auto& e : catalog::entries()) {
            for (auto [symbol, flags] : {std::pair{e.symbol, 0}, std::pair{e.per_thread, 2}}) {
                if (symbol != info.symbol) continue;
                found = true;
                const auto r = catalog::resolve(e.base, e.version, static_cast<std::uint64_t>(flags));
                CHECK(r.symbol == info.symbol);
                CHECK(shim::find_hook(r.symbol) == static_cast<HookId>(i));
            }
        }
        CHECK(found);
    }
}

TEST_CASE("every allocation, free and VMM entry point of the catalog is wrapped") {
    const std::set<std::string> not_wrapped = {
        "cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDeviceGetAttribute",
        "cuDeviceTotalMem_v2", "cuDeviceGetPCIBusId", "cuDeviceGetUuid", "cuDeviceGetUuid_v2", "cuDevicePrimaryCtxGetState",
        "cuPointerGetAttribute", "cuCtxGetCurrent",
        "cuCtxSetCurrent", "cuCtxGetDevice", "cuCtxSynchronize", "cuGetErrorName", "cuGetErrorString",
        "cuMemGetAddressRange_v2", "cuStreamCreate", "cuStreamDestroy_v2", "cuStreamSynchronize",
        "cuStreamSynchronize_ptsz", "cuStreamIsCapturing", "cuStreamIsCapturing_ptsz", "cuMemPoolGetAttribute",
        "cuDeviceGetDefaultMemPool", "cuDeviceGetMemPool", "cuDeviceSetMemPool", "cuGraphCreate",
        "cuDeviceGetGraphMemAttribute", "cuMemPoolExportToShareableHandle", "cuArrayGetDescriptor_v2",
        "cuArray3DGetDescriptor_v2", "cuMipmappedArrayGetLevel",
        // questions (a kernel handle takes no device memory until its function is got or it is launched)
        "cuCtxGetLimit", "cuMemsetD8_v2", "cuMemPrefetchAsync_v2", "cuFuncGetAttribute", "cuFuncGetName",
        "cuLibraryGetKernel", "cuKernelGetLibrary", "cuModuleGetLoadingMode",
        // a thread's context stack, and the parts a green context is made of (its creation is wrapped)
        "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2", "cuDeviceGetDevResource", "cuDevSmResourceSplitByCount",
        "cuDevResourceGenerateDesc", "cuCtxFromGreenCtx"};
    for (const auto& e : catalog::entries()) {
        for (auto symbol : {e.symbol, e.per_thread}) {
            if (symbol.empty() || not_wrapped.count(std::string(symbol))) continue;
            INFO(symbol);
            CHECK(shim::find_hook(symbol) != HookId::count);
        }
    }
}

TEST_CASE("names that are not ours are not in the dlsym map") {
    CHECK(shim::find_hook("malloc") == HookId::count);
    CHECK(shim::find_hook("cuInit") == HookId::count);
    CHECK(shim::find_hook("") == HookId::count);
    CHECK(shim::find_hook("cudaMalloc") == HookId::cudaMalloc);
}

TEST_CASE("the shim names every CUresult as the simulated driver does: one table for both") {
    for (const auto& row : cumemaudit::cuda_errors::kRows) CHECK(std::string(cumemaudit::shim::result_name(row.code)) == row.name);
    CHECK(std::string(cumemaudit::shim::result_name(CUDA_ERROR_KEY_ROTATION)) == "CUDA_ERROR_KEY_ROTATION");  // was OTHER
    CHECK(std::string(cumemaudit::shim::result_name(static_cast<CUresult>(123456))) == "CUDA_ERROR_OTHER");
}
