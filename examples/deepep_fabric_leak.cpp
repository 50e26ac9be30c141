// deepep_fabric_leak: a runnable reproduction of the DeepEP/HybridEP fabric allocator leak (DeepEP
// issue 799; docs/DRIVER.md, "The allocators the scenarios model"). Each growth of the buffer frees the
// old one the way DeepEP does, which unmaps but never drops the creation, retain and import references,
// so a whole buffer stays held per growth and cuMemGetInfo's free figure falls by exactly that much.
// --fixed adds the three missing cuMemRelease calls and the figure returns to where it started.
//
// Every driver call goes through `Driver`, filled by one of the ways real programs reach the driver
// (--door), so the auditor can be tested on each. The three leaking calls sit on their own lines in
// non-inlined functions so a captured stack names this file and line.
//
//   deepep_fabric_leak [--steps N] [--size-mib M] [--handle fabric|posix] [--fixed]
//                      [--door direct|dlsym|procaddress-v1|procaddress-v2|cudart] [--expect-drop BYTES]
#include "example_args.hpp"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

// The entry points this program uses: base name, exported symbol, and the version cudart 13 asks for.
#define DRIVER_ENTRIES(X)                                            \
    X(cuInit, cuInit, 2000)                                          \
    X(cuDeviceGet, cuDeviceGet, 2000)                                \
    X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000)      \
    X(cuCtxSetCurrent, cuCtxSetCurrent, 4000)                        \
    X(cuGetErrorName, cuGetErrorName, 6000)                          \
    X(cuMemGetInfo, cuMemGetInfo_v2, 3020)                           \
    X(cuMemGetAddressRange, cuMemGetAddressRange_v2, 3020)           \
    X(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity, 10020) \
    X(cuMemCreate, cuMemCreate, 10020)                               \
    X(cuMemRelease, cuMemRelease, 10020)                             \
    X(cuMemAddressReserve, cuMemAddressReserve, 10020)               \
    X(cuMemAddressFree, cuMemAddressFree, 10020)                     \
    X(cuMemMap, cuMemMap, 10020)                                     \
    X(cuMemUnmap, cuMemUnmap, 10020)                                 \
    X(cuMemSetAccess, cuMemSetAccess, 10020)                         \
    X(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000) \
    X(cuMemExportToShareableHandle, cuMemExportToShareableHandle, 10020) \
    X(cuMemImportFromShareableHandle, cuMemImportFromShareableHandle, 10020)

struct Driver {
#define DRIVER_MEMBER(base, symbol, version) PFN_##base##_v##version base = nullptr;
    DRIVER_ENTRIES(DRIVER_MEMBER)
#undef DRIVER_MEMBER
};

using cumemaudit::example::die;

void* open_libcuda() {
    void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) die(std::string("dlopen libcuda.so.1: ") + ::dlerror());
    return lib;
}

PFN_cuGetProcAddress_v12000 dlsym_get_proc_address_v2(void* lib) {
    auto gpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(::dlsym(lib, "cuGetProcAddress_v2"));
    if (gpa == nullptr) die("dlsym cuGetProcAddress_v2 failed");
    return gpa;
}

// Fills `d` the way the chosen kind of program does.
Driver open_door(const std::string& door) {
    Driver d;
    if (door == "direct") {  // linked with -lcuda: the versioned symbols cuda.h maps to
#define DIRECT(base, symbol, version) d.base = &symbol;
        DRIVER_ENTRIES(DIRECT)
#undef DIRECT
        return d;
    }
    void* lib = open_libcuda();
    if (door == "dlsym") {  // DeepEP main's lazy driver: dlsym of each versioned name
#define DLSYM(base, symbol, version)                                          \
    d.base = reinterpret_cast<decltype(d.base)>(::dlsym(lib, #symbol));        \
    if (d.base == nullptr) die("dlsym " #symbol " failed");
        DRIVER_ENTRIES(DLSYM)
#undef DLSYM
        return d;
    }
    const auto gpa2 = dlsym_get_proc_address_v2(lib);
    CUdriverProcAddressQueryResult st{};
    if (door == "procaddress-v2") {  // every base name at 12000 through the dlsym'ed cuGetProcAddress_v2
#define PA2(base, symbol, version)                                                                    \
    if (gpa2(#base, reinterpret_cast<void**>(&d.base), 12000, 0, &st) != CUDA_SUCCESS) die("cuGetProcAddress_v2 " #base);
        DRIVER_ENTRIES(PA2)
#undef PA2
        return d;
    }
    if (door == "procaddress-v1") {  // the v1 entry point, obtained at 11030, then used for every look-up
        PFN_cuGetProcAddress_v11030 gpa1 = nullptr;
        if (gpa2("cuGetProcAddress", reinterpret_cast<void**>(&gpa1), 11030, 0, &st) != CUDA_SUCCESS)
            die("cuGetProcAddress_v2(\"cuGetProcAddress\", 11030) failed");
#define PA1(base, symbol, version) \
    if (gpa1(#base, reinterpret_cast<void**>(&d.base), 12000, 0) != CUDA_SUCCESS) die("cuGetProcAddress " #base);
        DRIVER_ENTRIES(PA1)
#undef PA1
        return d;
    }
    if (door == "cudart") {  // cudart 13: the pointer returned for "cuGetProcAddress" at 12000 does the rest
        PFN_cuGetProcAddress_v12000 gpa = nullptr;
        if (gpa2("cuGetProcAddress", reinterpret_cast<void**>(&gpa), 12000, 0, &st) != CUDA_SUCCESS)
            die("cuGetProcAddress_v2(\"cuGetProcAddress\", 12000) failed");
#define RT(base, symbol, version)                                                                    \
    if (gpa(#base, reinterpret_cast<void**>(&d.base), version, 0, &st) != CUDA_SUCCESS) die("cuGetProcAddress " #base);
        DRIVER_ENTRIES(RT)
#undef RT
        return d;
    }
    die("unknown --door '" + door + "' (direct, dlsym, procaddress-v1, procaddress-v2 or cudart)");
}

struct Shareable {
    CUmemAllocationHandleType type;
    CUmemFabricHandle fabric;
    int fd;
};

// DeepEP's allocator (hybrid-ep branch), reduced to its driver calls. Each method's sequence is the
// one docs/DRIVER.md lists; `fixed_` adds the releases the fix added.
class FabricAllocator {
public:
    FabricAllocator(const Driver& d, CUmemAllocationHandleType type, bool fixed) : d_(d), type_(type), fixed_(fixed) {}

    std::size_t round(std::size_t size) const {
        const CUmemAllocationProp p = prop();
        std::size_t g = 0;
        check(d_.cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "cuMemGetAllocationGranularity");
        return (size + g - 1) / g * g;
    }

    // create -> reserve -> map -> set access; keeps the creation reference.
    __attribute__((noinline)) CUdeviceptr allocate(std::size_t size) {
        const CUmemAllocationProp p = prop();
        CUmemGenericAllocationHandle handle = 0;
        CUresult r = d_.cuMemCreate(&handle, size, &p, 0);
        check(r, "cuMemCreate");
        const CUdeviceptr ptr = map_new(handle, size);
        if (fixed_) check(d_.cuMemRelease(handle), "cuMemRelease (after map)");
        return ptr;
    }

    // get address range -> retain -> export; keeps the retained reference.
    __attribute__((noinline)) Shareable get_handle(CUdeviceptr ptr) {
        CUdeviceptr base = 0;
        std::size_t size = 0;
        check(d_.cuMemGetAddressRange(&base, &size, ptr), "cuMemGetAddressRange");
        CUmemGenericAllocationHandle handle = 0;
        CUresult r = d_.cuMemRetainAllocationHandle(&handle, reinterpret_cast<void*>(base));
        check(r, "cuMemRetainAllocationHandle");
        Shareable s{type_, {}, -1};
        void* out = type_ == CU_MEM_HANDLE_TYPE_FABRIC ? static_cast<void*>(&s.fabric) : static_cast<void*>(&s.fd);
        check(d_.cuMemExportToShareableHandle(out, handle, type_, 0), "cuMemExportToShareableHandle");
        if (fixed_) check(d_.cuMemRelease(handle), "cuMemRelease (after export)");
        return s;
    }

    // import -> reserve -> map -> set access; keeps the import reference. A POSIX fd is closed once
    // imported, as a peer that received it over a socket does.
    __attribute__((noinline)) CUdeviceptr open_handle(Shareable& s, std::size_t size) {
        void* os = s.type == CU_MEM_HANDLE_TYPE_FABRIC ? static_cast<void*>(&s.fabric)
                                                        : reinterpret_cast<void*>(static_cast<std::intptr_t>(s.fd));
        CUmemGenericAllocationHandle handle = 0;
        CUresult r = d_.cuMemImportFromShareableHandle(&handle, os, s.type);
        check(r, "cuMemImportFromShareableHandle");
        if (s.type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
            ::close(s.fd);
            s.fd = -1;
        }
        const CUdeviceptr ptr = map_new(handle, size);
        if (fixed_) check(d_.cuMemRelease(handle), "cuMemRelease (after import)");
        return ptr;
    }

    // retain -> get address range -> unmap -> address free -> release (its own retain only).
    void free(CUdeviceptr ptr) {
        CUmemGenericAllocationHandle handle = 0;
        check(d_.cuMemRetainAllocationHandle(&handle, reinterpret_cast<void*>(ptr)), "cuMemRetainAllocationHandle");
        CUdeviceptr base = 0;
        std::size_t size = 0;
        check(d_.cuMemGetAddressRange(&base, &size, ptr), "cuMemGetAddressRange");
        check(d_.cuMemUnmap(base, size), "cuMemUnmap");
        check(d_.cuMemAddressFree(base, size), "cuMemAddressFree");
        check(d_.cuMemRelease(handle), "cuMemRelease");
    }

    // get address range -> unmap -> address free.
    void close_handle(CUdeviceptr ptr) {
        CUdeviceptr base = 0;
        std::size_t size = 0;
        check(d_.cuMemGetAddressRange(&base, &size, ptr), "cuMemGetAddressRange");
        check(d_.cuMemUnmap(base, size), "cuMemUnmap");
        check(d_.cuMemAddressFree(base, size), "cuMemAddressFree");
    }

private:
    CUmemAllocationProp prop() const { return cumemaudit::example::device_prop(0, type_); }

    CUdeviceptr map_new(CUmemGenericAllocationHandle handle, std::size_t size) {
        CUdeviceptr ptr = 0;
        check(d_.cuMemAddressReserve(&ptr, size, 0, 0, 0), "cuMemAddressReserve");
        check(d_.cuMemMap(ptr, size, 0, handle, 0), "cuMemMap");
        const CUmemAccessDesc access = cumemaudit::example::read_write(0);
        check(d_.cuMemSetAccess(ptr, size, &access, 1), "cuMemSetAccess");
        return ptr;
    }

    void check(CUresult r, const char* what) const {
        if (r == CUDA_SUCCESS) return;
        const char* name = nullptr;
        d_.cuGetErrorName(r, &name);
        die(std::string(what) + " failed: " + (name ? name : std::to_string(r)));
    }

    const Driver& d_;
    CUmemAllocationHandleType type_;
    bool fixed_;
};

struct Options {
    int steps = 3;
    std::size_t size_mib = 64;
    CUmemAllocationHandleType handle = CU_MEM_HANDLE_TYPE_FABRIC;
    bool fixed = false;
    std::string door = "direct";
    long long expect_drop = -1;
};

Options parse(int argc, char** argv) {
    Options o;
    CLI::App app{"The DeepEP/HybridEP fabric allocator leak (see the comment at the top)", "deepep_fabric_leak"};
    const std::map<std::string, CUmemAllocationHandleType> handles{
        {"fabric", CU_MEM_HANDLE_TYPE_FABRIC}, {"posix", CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR}};
    app.add_option("--steps", o.steps, "growth steps")->check(CLI::Range(1, 1 << 20));
    app.add_option("--size-mib", o.size_mib, "bytes of the first buffer, in MiB")->check(CLI::Range(1, 1 << 20));
    app.add_flag("--fixed", o.fixed, "add the three missing cuMemRelease calls");
    app.add_option("--door", o.door, "how the driver is reached: direct, dlsym, procaddress-v1, procaddress-v2, cudart");
    app.add_option("--expect-drop", o.expect_drop, "exit 1 unless free memory drops by exactly this");
    app.add_option("--handle", o.handle, "fabric or posix")->transform(CLI::CheckedTransformer(handles));
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        std::exit(app.exit(e) == 0 ? 0 : 2);
    }
    return o;
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    const Driver d = open_door(o.door);
    if (d.cuInit(0) != CUDA_SUCCESS) die("cuInit failed");
    CUdevice dev = 0;
    CUcontext ctx = nullptr;
    if (d.cuDeviceGet(&dev, 0) != CUDA_SUCCESS || d.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        d.cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        die("no device 0 context");
    auto free_now = [&] {
        std::size_t f = 0, t = 0;
        if (d.cuMemGetInfo(&f, &t) != CUDA_SUCCESS) die("cuMemGetInfo failed");
        return f;
    };

    FabricAllocator alloc(d, o.handle, o.fixed);
    std::printf("DeepEP fabric allocator: %d steps, %s handles, door %s, %s\n", o.steps,
                o.handle == CU_MEM_HANDLE_TYPE_FABRIC ? "fabric" : "posix", o.door.c_str(),
                o.fixed ? "fixed (releases after map, export and import)" : "as shipped (no releases)");
    const std::size_t start_free = free_now();
    CUdeviceptr local = 0, peer = 0;
    long long expected = 0;
    for (int step = 0; step < o.steps; ++step) {
        const std::size_t size = alloc.round(o.size_mib * (std::size_t{1} << 20) * static_cast<std::size_t>(step + 1));
        if (local != 0) {  // update_buffer on a new high: release the old buffer set, then allocate
            alloc.free(local);
            alloc.close_handle(peer);
        }
        local = alloc.allocate(size);
        Shareable s = alloc.get_handle(local);
        peer = alloc.open_handle(s, size);
        if (!o.fixed) expected += static_cast<long long>(size);
        std::printf("step %d: buffer grows to %zu MiB: allocate, get_handle, open_handle (peer = this process); "
                    "free now %zu MiB\n", step, size >> 20, free_now() >> 20);
    }
    alloc.free(local);
    alloc.close_handle(peer);
    const std::size_t end_free = free_now();
    const long long drop = static_cast<long long>(start_free) - static_cast<long long>(end_free);
    std::printf("teardown: free + close_handle of the last buffer; %s\n",
                o.fixed ? "every reference released, memory returned"
                        : "each buffer is still held by its creation, retain and import references");
    std::printf("cuMemGetInfo: start_free=%zu end_free=%zu drop=%lld\n", start_free, end_free, drop);
    if (o.expect_drop >= 0 && drop != o.expect_drop) {
        std::fprintf(stderr, "deepep_fabric_leak: expected a drop of %lld bytes, got %lld (the leak model expects %lld)\n",
                     o.expect_drop, drop, expected);
        return 1;
    }
    return 0;
}
