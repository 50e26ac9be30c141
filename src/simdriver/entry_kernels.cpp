// Entry points for modules, libraries and launches: PTX loaded for its kernels' names, local memory and code and its
// globals, launches that may raise the context's stack limit (kernels.cpp). Nothing executes on a simulated device.
#include "entry_guard.hpp"
#include "state.hpp"

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>

using cumemaudit::sim::guarded;
using cumemaudit::sim::SimState;

namespace {

// JIT options ask nothing the simulated driver can answer but for its logs, which stay empty: a caller that
// prints them after the load reads an empty string and a size of 0.
CUresult load_ex(CUmodule* module, const void* image, unsigned n, CUjit_option* options, void** values) {
    if (module == nullptr || image == nullptr || (n != 0 && (options == nullptr || values == nullptr)))
        return CUDA_ERROR_INVALID_VALUE;
    const CUresult r = SimState::get().module_load(module, static_cast<const char*>(image));
    for (unsigned i = 0; i < n; ++i) {
        if (options[i] != CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES && options[i] != CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) continue;
        const CUjit_option buffer = options[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ? CU_JIT_INFO_LOG_BUFFER : CU_JIT_ERROR_LOG_BUFFER;
        const bool room = reinterpret_cast<std::uintptr_t>(values[i]) != 0;  // the size is passed as the value
        for (unsigned j = 0; j < n; ++j)
            if (options[j] == buffer && values[j] != nullptr && room) *static_cast<char*>(values[j]) = '\0';
        values[i] = nullptr;  // bytes of log written: none
    }
    return r;
}

// A file's text (cuModuleLoad, cuLibraryLoadFromFile): false when it cannot be read.
bool read_file(const char* path, std::string& out) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return true;
}

CUresult library_load(CUlibrary* library, const char* image, unsigned n_jit, CUjit_option* jit, void** jit_values,
                      unsigned n_lib, CUlibraryOption* lib, void** lib_values) {
    if (library == nullptr || image == nullptr || (n_jit != 0 && (jit == nullptr || jit_values == nullptr)) ||
        (n_lib != 0 && (lib == nullptr || lib_values == nullptr)))
        return CUDA_ERROR_INVALID_VALUE;
    return SimState::get().library_load(library, image);
}

CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, CUstream s) {
    const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    return SimState::get().launch(f, s, grid, block);
}

// Launch attributes (cooperative, cluster shape, priority) change nothing the simulated driver models.
CUresult launch_ex(const CUlaunchConfig* config, CUfunction f) {
    if (config == nullptr || (config->numAttrs != 0 && config->attrs == nullptr)) return CUDA_ERROR_INVALID_VALUE;
    return launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX, config->blockDimY,
                  config->blockDimZ, config->hStream);
}

}  // namespace

extern "C" {

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
    return guarded([&] { return load_ex(module, image, 0, nullptr, nullptr); });
}

CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int numOptions, CUjit_option* options,
                            void** optionValues) {
    return guarded([&] { return load_ex(module, image, numOptions, options, optionValues); });
}

CUresult cuModuleLoad(CUmodule* module, const char* fname) {
    return guarded([&] {
        std::string text;
        if (module == nullptr || fname == nullptr) return CUDA_ERROR_INVALID_VALUE;
        return read_file(fname, text) ? load_ex(module, text.c_str(), 0, nullptr, nullptr) : CUDA_ERROR_FILE_NOT_FOUND;
    });
}

CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) {
    return guarded([&] { return load_ex(module, fatCubin, 0, nullptr, nullptr); });
}

CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jitOptions, void** jitOptionsValues,
                           unsigned int numJitOptions, CUlibraryOption* libraryOptions, void** libraryOptionValues,
                           unsigned int numLibraryOptions) {
    return guarded([&] {
        return library_load(library, static_cast<const char*>(code), numJitOptions, jitOptions, jitOptionsValues,
                            numLibraryOptions, libraryOptions, libraryOptionValues);
    });
}

CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* fileName, CUjit_option* jitOptions,
                               void** jitOptionsValues, unsigned int numJitOptions, CUlibraryOption* libraryOptions,
                               void** libraryOptionValues, unsigned int numLibraryOptions) {
    return guarded([&] {
        std::string text;
        if (library == nullptr || fileName == nullptr) return CUDA_ERROR_INVALID_VALUE;
        if (!read_file(fileName, text)) return CUDA_ERROR_FILE_NOT_FOUND;
        return library_load(library, text.c_str(), numJitOptions, jitOptions, jitOptionsValues, numLibraryOptions,
                            libraryOptions, libraryOptionValues);
    });
}

CUresult cuLibraryUnload(CUlibrary library) {
    return guarded([&] { return SimState::get().library_unload(library); });
}

CUresult cuLibraryGetModule(CUmodule* pMod, CUlibrary library) {
    return guarded([&] { return pMod == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().library_module(pMod, library); });
}

CUresult cuLibraryGetKernel(CUkernel* pKernel, CUlibrary library, const char* name) {
    return guarded([&] {
        return pKernel == nullptr || name == nullptr ? CUDA_ERROR_INVALID_VALUE
                                                     : SimState::get().library_kernel(pKernel, library, name);
    });
}

CUresult cuKernelGetFunction(CUfunction* pFunc, CUkernel kernel) {
    return guarded([&] { return pFunc == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().kernel_function(pFunc, kernel); });
}

CUresult cuKernelGetLibrary(CUlibrary* pLib, CUkernel kernel) {
    return guarded([&] { return pLib == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().kernel_library(pLib, kernel); });
}

CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode* mode) {
    return guarded([&] { return mode == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().loading_mode(mode); });
}

CUresult cuModuleUnload(CUmodule hmod) {
    return guarded([&] { return SimState::get().module_unload(hmod); });
}

CUresult cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
    return guarded([&] {
        return hfunc == nullptr || name == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().module_function(hfunc, hmod, name);
    });
}

CUresult cuFuncGetAttribute(int* pi, CUfunction_attribute attrib, CUfunction hfunc) {
    return guarded([&] { return pi == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().function_attribute(pi, attrib, hfunc); });
}

CUresult cuFuncGetName(const char** name, CUfunction hfunc) {
    return guarded([&] { return name == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().function_name(name, hfunc); });
}

// Parameters are not read: nothing runs. `f` may be a library's CUkernel, as cuda.h allows.
CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int,
                        CUstream hStream, void**, void**) {
    return guarded([&] { return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream); });
}
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                             unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int,
                             CUstream hStream, void**, void**) {
    return guarded([&] { return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream); });
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void**, void**) {
    return guarded([&] { return launch_ex(config, f); });
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void**, void**) {
    return guarded([&] { return launch_ex(config, f); });
}

// Whether the grid fits on the device at once (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE) is not modelled.
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                   unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int,
                                   CUstream hStream, void**) {
    return guarded([&] { return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream); });
}
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                        unsigned int, CUstream hStream, void**) {
    return guarded([&] { return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream); });
}

}  // extern "C"
