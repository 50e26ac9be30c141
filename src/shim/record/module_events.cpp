// The events of modules and libraries: a load the driver accepted is booked at its site with its image's
// bytes, an unload takes it off. A refused load needs nothing here: its row watches refusals, so an
// out-of-memory answer makes an OOM record like an allocation's.
#include "shim/record/events.hpp"

#include "shim/record/recorder.hpp"
#include "shim/services/module_image.hpp"

namespace cumemaudit::shim {
namespace {

void loaded(Call& call, const void* handle, std::uint64_t image_bytes) {
    Recorder& rec = call.recorder();
    rec.modules().loaded(handle, image_bytes, call.site(), rec.timeline().last_step());
}

}  // namespace

void record(ev::ModuleLoad, Call& call, CUresult r, CUmodule* module, const char* fname) {
    if (r == CUDA_SUCCESS && module != nullptr) loaded(call, *module, module_file_bytes(fname));
}
void record(ev::ModuleLoad, Call& call, CUresult r, CUmodule* module, const void* image) {
    if (r == CUDA_SUCCESS && module != nullptr) loaded(call, *module, module_image_bytes(image));
}
void record(ev::ModuleLoad, Call& call, CUresult r, CUmodule* module, const void* image, unsigned int, CUjit_option*, void**) {
    if (r == CUDA_SUCCESS && module != nullptr) loaded(call, *module, module_image_bytes(image));
}
void record(ev::ModuleLoad, Call& call, CUresult r, CUlibrary* library, const void* code, CUjit_option*, void**, unsigned int,
            CUlibraryOption*, void**, unsigned int) {
    if (r == CUDA_SUCCESS && library != nullptr) loaded(call, *library, module_image_bytes(code));
}
void record(ev::ModuleLoad, Call& call, CUresult r, CUlibrary* library, const char* fileName, CUjit_option*, void**,
            unsigned int, CUlibraryOption*, void**, unsigned int) {
    if (r == CUDA_SUCCESS && library != nullptr) loaded(call, *library, module_file_bytes(fileName));
}

void record(ev::ModuleUnload, Call& call, CUresult r, CUmodule module) {
    if (r == CUDA_SUCCESS) call.recorder().modules().unloaded(module);
}
void record(ev::ModuleUnload, Call& call, CUresult r, CUlibrary library) {
    if (r == CUDA_SUCCESS) call.recorder().modules().unloaded(library);
}

}  // namespace cumemaudit::shim
