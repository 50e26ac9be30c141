// expandable_segments: PyTorch's expandable-segment allocator (docs/DRIVER.md). One huge address
// reservation (~157 GiB), 20 MiB cuMemCreate + cuMemMap + cuMemSetAccess per growth, shrink by
// cuMemUnmap -> close the exported fd -> cuMemRelease, sharing by POSIX-fd export and import. Entry points
// come from cuGetProcAddress at 12000, as cudaGetDriverEntryPoint gives them. Balanced.
#include "support/program.hpp"

#include "scenario.hpp"

#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

using scenario::expect_eq;
using scenario::ok;

namespace {

PFN_cuGetProcAddress_v12000 g_gpa = nullptr;

template <typename T>
T entry(const char* name) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult st{};
    ok(g_gpa(name, &fn, 12000, 0, &st), name);
    return reinterpret_cast<T>(fn);
}

constexpr std::size_t MiB = 1 << 20;
constexpr std::size_t kSegment = 20 * MiB;
constexpr std::size_t kReserve = 157ull << 30;

struct Segment {
    CUmemGenericAllocationHandle handle = 0;
    int fd = -1;  // exported for sharing; -1 when never shared
};

}  // namespace

int main() {
    scenario::g_program = "expandable_segments";
    void* lib = ::dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == nullptr) scenario::fail("dlopen libcuda.so.1");
    g_gpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(::dlsym(lib, "cuGetProcAddress_v2"));
    if (g_gpa == nullptr) scenario::fail("dlsym cuGetProcAddress_v2");
    const auto init = entry<PFN_cuInit_v2000>("cuInit");
    const auto ctx_retain = entry<PFN_cuDevicePrimaryCtxRetain_v7000>("cuDevicePrimaryCtxRetain");
    const auto ctx_set = entry<PFN_cuCtxSetCurrent_v4000>("cuCtxSetCurrent");
    const auto get_info = entry<PFN_cuMemGetInfo_v3020>("cuMemGetInfo");
    const auto create = entry<PFN_cuMemCreate_v10020>("cuMemCreate");
    const auto release = entry<PFN_cuMemRelease_v10020>("cuMemRelease");
    const auto reserve = entry<PFN_cuMemAddressReserve_v10020>("cuMemAddressReserve");
    const auto address_free = entry<PFN_cuMemAddressFree_v10020>("cuMemAddressFree");
    const auto map = entry<PFN_cuMemMap_v10020>("cuMemMap");
    const auto unmap = entry<PFN_cuMemUnmap_v10020>("cuMemUnmap");
    const auto set_access = entry<PFN_cuMemSetAccess_v10020>("cuMemSetAccess");
    const auto export_handle = entry<PFN_cuMemExportToShareableHandle_v10020>("cuMemExportToShareableHandle");
    const auto import_handle = entry<PFN_cuMemImportFromShareableHandle_v10020>("cuMemImportFromShareableHandle");

    ok(init(0), "cuInit");
    CUcontext ctx = nullptr;
    ok(ctx_retain(&ctx, 0), "cuDevicePrimaryCtxRetain");
    ok(ctx_set(ctx), "cuCtxSetCurrent");
    auto free_now = [&] {
        std::size_t f = 0, t = 0;
        ok(get_info(&f, &t), "cuMemGetInfo");
        return static_cast<long long>(f);
    };
    const CUmemAllocationProp prop = cumemaudit::program::device_prop(0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    const CUmemAccessDesc access = cumemaudit::program::read_write(0);

    const long long start = free_now();
    CUdeviceptr base = 0;
    ok(reserve(&base, kReserve, 0, 0, 0), "cuMemAddressReserve (157 GiB)");
    expect_eq(start - free_now(), 0, "an address reservation costs no memory");

    // Grow: one 20 MiB segment at a time, mapped end to end.
    std::vector<Segment> segs(12);
    for (std::size_t i = 0; i < segs.size(); ++i) {
        ok(create(&segs[i].handle, kSegment, &prop, 0), "cuMemCreate");
        ok(map(base + i * kSegment, kSegment, 0, segs[i].handle, 0), "cuMemMap");
        ok(set_access(base + i * kSegment, kSegment, &access, 1), "cuMemSetAccess");
    }
    expect_eq(start - free_now(), static_cast<long long>(12 * kSegment), "free drop after 12 growths");

    // share(): export each of the first 4 segments; fromShared(): import them into a fresh range.
    CUdeviceptr other = 0;
    ok(reserve(&other, 4 * kSegment, 0, 0, 0), "cuMemAddressReserve (import)");
    std::vector<CUmemGenericAllocationHandle> imported(4);
    for (std::size_t i = 0; i < 4; ++i) {
        ok(export_handle(&segs[i].fd, segs[i].handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), "cuMemExportToShareableHandle");
        ok(import_handle(&imported[i], reinterpret_cast<void*>(static_cast<std::intptr_t>(segs[i].fd)),
                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), "cuMemImportFromShareableHandle");
        ok(map(other + i * kSegment, kSegment, 0, imported[i], 0), "cuMemMap (import)");
        ok(set_access(other + i * kSegment, kSegment, &access, 1), "cuMemSetAccess (import)");
    }
    expect_eq(start - free_now(), static_cast<long long>(12 * kSegment), "imports add no memory");
    // The importer drops its view: unmap, release, free its range.
    ok(unmap(other, 4 * kSegment), "cuMemUnmap (import range)");
    for (auto h : imported) ok(release(h), "cuMemRelease (import)");
    ok(address_free(other, 4 * kSegment), "cuMemAddressFree (import)");

    // Shrink from the top: unmap -> close the exported fd -> release, one segment at a time.
    auto shrink_to = [&](std::size_t keep) {
        while (segs.size() > keep) {
            Segment s = segs.back();
            const std::size_t i = segs.size() - 1;
            ok(unmap(base + i * kSegment, kSegment), "cuMemUnmap");
            if (s.fd >= 0) ::close(s.fd);
            ok(release(s.handle), "cuMemRelease");
            segs.pop_back();
        }
    };
    shrink_to(6);
    expect_eq(start - free_now(), static_cast<long long>(6 * kSegment), "free drop after shrinking to 6 segments");
    shrink_to(0);
    ok(address_free(base, kReserve), "cuMemAddressFree (157 GiB)");
    expect_eq(free_now(), start, "free memory after shrinking to nothing");
    std::printf("expandable_segments: 12 segments of 20 MiB grown, 4 shared and imported, shrunk; balanced\n");
    return 0;
}
