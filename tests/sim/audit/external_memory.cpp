// External memory imported as Vulkan interop does.
// Run as `audit_scenarios external-memory`; checked by external_memory_test.py, which finds
// each site by its `// site:NAME` marker.
#include "scenarios.hpp"
#include <sys/mman.h>

// External memory as Vulkan interop imports it (the CUDA samples' simpleVulkan: an opaque fd and its size,
// one buffer mapped over it, cuMemFree of the buffer and cuDestroyExternalMemory at the end). The exporter
// here is the driver itself: a cuMemCreate allocation's POSIX fd, which the H200 imports as an opaque fd. The
// object is destroyed while its buffer is mapped (the buffer keeps the memory); a second one is never destroyed.
int external_memory() {
    init_primary_context();
    auto step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    auto exported = [](size_t bytes) {
        CUmemAllocationProp p = props();
        p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        CUmemGenericAllocationHandle h = 0;
        OK(cuMemCreate(&h, bytes, &p, 0));
        int fd = -1;
        OK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        OK(cuMemRelease(h));  // the exporter is done with it: the fd (then the import) keeps it
        return fd;
    };
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC desc{};
    desc.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD;
    desc.handle.fd = exported(256 * kMiB);
    desc.size = 256 * kMiB;
    CUexternalMemory ext = nullptr;
    OK(cuImportExternalMemory(&ext, &desc));  // site:ext_import
    CUDA_EXTERNAL_MEMORY_BUFFER_DESC whole{};
    whole.size = 64 * kMiB;
    CUdeviceptr buffer = 0;
    OK(cuExternalMemoryGetMappedBuffer(&buffer, ext, &whole));
    if (step != nullptr) step(1);
    OK(cuDestroyExternalMemory(ext));
    if (step != nullptr) step(2);
    OK(cuMemFree(buffer));
    if (step != nullptr) step(3);
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC kept = desc;
    kept.handle.fd = exported(128 * kMiB);
    kept.size = 128 * kMiB;
    CUexternalMemory never_destroyed = nullptr;
    OK(cuImportExternalMemory(&never_destroyed, &kept));  // site:ext_kept
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC bogus = desc;
    bogus.handle.fd = memfd_create("not-memory", 0);
    bogus.size = 2 * kMiB;
    CUexternalMemory none = nullptr;
    CHECK(cuImportExternalMemory(&none, &bogus), CUDA_ERROR_UNKNOWN);
    std::printf("external_memory: done\n");
    return 0;
}

AUDIT_SCENARIO("external-memory", [](int, char**) { return external_memory(); });
