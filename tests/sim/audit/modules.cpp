// Modules and libraries the program keeps loaded: a JIT that compiles a kernel for every new shape and never
// unloads it (Triton's loadBinary: cuModuleLoadData, then cuModuleGetFunction; the module stays with the
// compiled kernel), beside a library loaded once (cuLibraryLoadData, as cuda.core and CUDA 12's runtime load
// code) and a module read from a file (cuModuleLoad). The PTX is JIT-compiled by a real driver, so the scenario
// runs on the GPU too.
#include "scenarios.hpp"

#include "support/kernels_ptx.hpp"
#include "support/module_code_ptx.hpp"

#include <string>

namespace {

using StepFn = void (*)(uint64_t);

// A kernel of its own name, as a JIT writes one per shape.
std::string kernel_ptx(const std::string& name) {
    return ".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry " + name + "(\n\t.param .u64 " + name +
           "_param_0\n)\n{\n\tret;\n}\n";
}

// One shape compiled and loaded; the module is kept, as the JIT keeps it with the kernel. Returns its image's bytes.
size_t compile_shape(int shape) {
    const std::string name = "shape_" + std::to_string(shape);
    const std::string ptx = kernel_ptx(name);
    CUmodule module = nullptr;
    CUfunction kernel = nullptr;
    OK(cuModuleLoadData(&module, ptx.c_str()));  // site:jit_load
    OK(cuModuleGetFunction(&kernel, module, name.c_str()));
    return ptx.size() + 1;
}

// 150 shapes at each of steps 1 and 2 (the default module_alarm is 100 a step); the library and the file's
// module unloaded at step 3; an allocation larger than the device refused in between.
int jit_modules(int, char**) {
    init_primary_context();
    const auto step = reinterpret_cast<StepFn>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    step(0);
    const std::string library_ptx = kernel_ptx("library_kernel");
    CUlibrary library = nullptr;
    CUmodule library_module = nullptr;
    OK(cuLibraryLoadData(&library, library_ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));  // site:library_load
    OK(cuLibraryGetModule(&library_module, library));
    char path[] = "/tmp/cumemaudit-module-XXXXXX";
    const int fd = mkstemp(path);
    const std::string file_ptx = kernel_ptx("file_kernel");
    if (fd < 0 || write(fd, file_ptx.data(), file_ptx.size()) != static_cast<ssize_t>(file_ptx.size())) return 1;
    close(fd);
    CUmodule file_module = nullptr;
    OK(cuModuleLoad(&file_module, path));  // site:file_load
    unlink(path);
    std::printf("jit_modules: library %zu bytes, file %zu bytes\n", library_ptx.size() + 1, file_ptx.size());
    for (int s = 1; s <= 2; ++s) {
        size_t bytes = 0;
        for (int i = 0; i < 150; ++i) bytes += compile_shape(s * 1000 + i);
        std::printf("jit_modules: step %d compiled 150 shapes, %zu bytes\n", s, bytes);
        step(static_cast<uint64_t>(s));
    }
    size_t total = 0;
    OK(cuDeviceTotalMem(&total, 0));
    CUdeviceptr too_big = 0;
    std::printf("jit_modules: more than the device: %s\n", result_name(cuMemAlloc(&too_big, total + kGran)));
    OK(cuLibraryUnload(library));
    OK(cuModuleUnload(file_module));
    step(3);
    return 0;
}

// The primary context current, a 4 KiB buffer made and step 0 marked: where each measure below starts from.
StepFn start_measures(CUdeviceptr& out) {
    init_primary_context();
    const auto step = reinterpret_cast<StepFn>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    OK(cuMemAlloc(&out, 4096));
    step(0);
    return step;
}

// What a module's code and globals take on the device, step by step, as a JIT (a module: load, get the
// function, launch) and CUDA's runtime under lazy loading (a library: load, get the kernel, get its function
// in this context, launch) take it; then a load refused for want of room while the library is still loaded,
// and both given back. Under CUDA_MODULE_LOADING=EAGER the same calls take it at the loads.
int module_code(int, char**) {
    CUdeviceptr out = 0;
    const StepFn step = start_measures(out);
    const std::string ptx = cumemaudit::program::module_code_ptx(40000);
    CUmodule module = nullptr;
    OK(cuModuleLoadData(&module, ptx.c_str()));  // site:code_module_load
    step(1);
    CUfunction code_a = nullptr;
    OK(cuModuleGetFunction(&code_a, module, "code_a"));  // site:code_get_function
    int m = 3;
    void* args[] = {&out, &m};
    OK(cuLaunchKernel(code_a, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
    OK(cuCtxSynchronize());
    step(2);
    CUlibrary library = nullptr;
    OK(cuLibraryLoadData(&library, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));  // site:code_library_load
    CUkernel kernel = nullptr;
    OK(cuLibraryGetKernel(&kernel, library, "code_a"));
    step(3);
    CUfunction library_a = nullptr;
    OK(cuKernelGetFunction(&library_a, kernel));  // site:code_kernel_function
    OK(cuLaunchKernel(library_a, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
    OK(cuCtxSynchronize());
    step(4);
    OK(cuModuleUnload(module));
    step(5);
    size_t free = 0, total = 0;
    OK(cuMemGetInfo(&free, &total));
    CUdeviceptr filler = 0;
    OK(cuMemAlloc(&filler, free - 16 * kMiB));  // site:code_filler
    CUmodule refused = nullptr;
    std::printf("module_code: a load with 16 MiB free: %s\n", result_name(cuModuleLoadData(&refused, ptx.c_str())));  // site:code_refused
    OK(cuMemFree(filler));
    OK(cuLibraryUnload(library));
    step(6);
    OK(cuMemFree(out));
    return 0;
}

// What CUDA's runtime does under lazy loading (the default): it loads a library and gets its kernels, then
// launches a kernel as it is, without getting its function in the context, so the driver loads the kernel's
// code inside its first launch; that launch also raises the kernel stack to the kernel's 32 KiB of local
// memory per thread. A second launch takes nothing; the unload gives the code back.
int module_code_launch(int, char**) {
    CUdeviceptr out = 0;
    const StepFn step = start_measures(out);
    CUlibrary library = nullptr;
    OK(cuLibraryLoadData(&library, cumemaudit::program::kLocalMemoryPtx, nullptr, nullptr, 0, nullptr, nullptr, 0));  // site:launch_library_load
    CUkernel kernel = nullptr;
    OK(cuLibraryGetKernel(&kernel, library, "local_heavy"));
    step(1);
    int n = 64;
    void* args[] = {&out, &n};
    for (int launch = 0; launch < 2; ++launch) {
        OK(cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
        OK(cuCtxSynchronize());
        step(2 + launch);
    }
    OK(cuLibraryUnload(library));
    step(4);
    OK(cuMemFree(out));
    return 0;
}

// A module loaded while another process on the device allocates: the test starts that process when the load
// begins ("loading"), and the load, which compiles its PTX first (CUMEMAUDIT_SIM_JIT_MS on the simulated
// driver; the JIT itself on a real one), lasts until it holds its memory. The module's globals are all the
// load takes for this process.
int module_load_beside(int, char**) {
    CUdeviceptr out = 0;
    const StepFn step = start_measures(out);
    const std::string ptx = cumemaudit::program::module_code_ptx(40000);
    std::printf("module_load_beside: loading\n");
    std::fflush(stdout);
    CUmodule module = nullptr;
    OK(cuModuleLoadData(&module, ptx.c_str()));  // site:beside_load
    std::printf("module_load_beside: loaded\n");
    std::fflush(stdout);
    step(1);
    OK(cuModuleUnload(module));
    step(2);
    OK(cuMemFree(out));
    return 0;
}

}  // namespace

AUDIT_SCENARIO("module-load-beside", module_load_beside);
AUDIT_SCENARIO("jit-modules", jit_modules);
AUDIT_SCENARIO("module-code-launch", module_code_launch);
AUDIT_SCENARIO("module-code", module_code);
