// The events of modules and libraries: a load the driver accepted is booked at its site with its image's
// bytes, an unload takes it off. What the driver takes on the device for their code and globals is measured
// around the calls that take it: the load (globals always; code too under eager loading), the first get of a
// function in a context and a kernel's first launch under lazy loading, and the unload that gives it back (docs/DRIVER.md, "Module code
// and globals"). A refused load or get needs nothing here: its row watches refusals, so an out-of-memory
// answer makes an OOM record like an allocation's.
#include "shim/record/events.hpp"

#include "common/heap_bytes.hpp"
#include "ledger/ledger.hpp"
#include "shim/record/measure_around.hpp"
#include "shim/record/recorder.hpp"
#include "shim/services/context_query.hpp"
#include "shim/services/driver_query.hpp"
#include "shim/services/module_image.hpp"
#include "shim/services/nvml_query.hpp"

#include <functional>
#include <optional>
#include <string_view>

namespace cumemaudit::shim {
namespace {

void loaded(Call& call, const void* handle, std::uint64_t image_bytes) {
    Recorder& rec = call.recorder();
    rec.modules().loaded(handle, image_bytes, call.site(), rec.timeline().last_step());
    rec.modules().took(handle, looked_device(), moved_since_before(call), current_context());
}

// Under eager loading a get takes nothing; under lazy loading only a first get can.
std::uint64_t get_key(const void* handle, std::uint64_t what) {
    return std::hash<const void*>{}(handle) * 0x9E3779B97F4A7C15ull ^ what;
}
// The key is made only under lazy loading: under eager loading a get costs one cached compare here.
template <class Key> bool worth_measuring(Call& call, Key key) {
    return lazy_module_loading() && call.recorder().modules().first_get(key());
}
std::uint64_t context_key() { return reinterpret_cast<std::uintptr_t>(current_context()); }

void unloaded(Call& call, CUresult r, const void* handle) {
    const int device = looked_device();
    const std::int64_t moved = moved_since_before(call);
    if (r == CUDA_SUCCESS) call.recorder().modules().unloaded(handle, device, moved, current_context());
}

// What a get (or a load its launch makes) took since look_before, booked to `handle` where it succeeded.
void got(Call& call, bool succeeded, const void* handle) {
    const int device = looked_device();
    const std::int64_t moved = moved_since_before(call);
    if (succeeded) call.recorder().modules().took(handle, device, moved, current_context());
}

// The stack limit before a measured launch: a launch that raises it takes the stack's growth too, which the
// context's part already names (context_book.cpp), so that much is not code.
thread_local std::uint64_t t_stack_before = 0;

}  // namespace

void prepare_code_measure(Call& call) { look_before(call); }
void prepare_load_measure(Call& call) { look_before(call, true, Others::ask); }

// A kernel's first launch. Under lazy loading a library's kernel (CUDA's runtime launches those as they are)
// has its code loaded here first, by the very load its launch would make in this context (a function got
// from a module had its code measured at the get), so that its code and what the launch reserves besides
// are told apart. Not while a stream capture is open: a call the driver does not allow during a capture
// would invalidate it (docs/DRIVER.md), so such a first launch goes unmeasured.
void prepare_launch_measure(Call& call, CUfunction f) {
    forget_look();  // a look no record consumed (a refused load) is no launch's
    if (call.recorder().capturing()) return;
    const auto kernel = reinterpret_cast<CUkernel>(f);
    if (lazy_module_loading())
        if (const CUlibrary library = library_of_kernel(kernel)) {
            look_before(call);
            got(call, load_kernel_here(kernel), library);
        }
    look_before(call);
    t_stack_before = looked() ? stack_limit_of(current_context()) : 0;
}

// Beyond a stack it raised (the context's part names that), a first launch reserves only its context's
// device heap, once, when its kernel is the first there to call malloc: the heap limit and 2 MiB
// (docs/DRIVER.md). Less than that is another thread's doing meanwhile, and is left alone.
void launch_took(Call& call, CUresult r, CUfunction f) {
    const int device = looked_device();
    std::int64_t moved = moved_since_before(call);
    if (r != CUDA_SUCCESS) first_launches().forget(f);
    if (r != CUDA_SUCCESS || moved <= 0) return;
    const CUcontext ctx = current_context();
    const std::uint64_t stack_after = stack_limit_of(ctx);
    if (stack_after > t_stack_before)
        moved -= static_cast<std::int64_t>((stack_after - t_stack_before) * device_threads(device));
    const std::uint64_t heap = heap_reservation(limit_of(ctx, CU_LIMIT_MALLOC_HEAP_SIZE));
    if (moved > 0 && static_cast<std::uint64_t>(moved) >= heap)
        call.recorder().contexts().heap_reserved(ctx, heap, kernel_facts(f).name, call.site());
}

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

void record(ev::ModuleUnload, Call& call, CUresult r, CUmodule module) { unloaded(call, r, module); }
void record(ev::ModuleUnload, Call& call, CUresult r, CUlibrary library) { unloaded(call, r, library); }

void prepare(ev::CodeLoad, Call& call, CUfunction*, CUmodule module, const char* name) {
    look_before(call, name != nullptr &&
                          worth_measuring(call, [&] { return get_key(module, std::hash<std::string_view>{}(name)); }));
}
void prepare(ev::CodeLoad, Call& call, CUfunction*, CUkernel kernel) {
    look_before(call, worth_measuring(call, [&] { return get_key(kernel, context_key()); }));
}
void prepare(ev::CodeLoad, Call& call, CUmodule*, CUlibrary library) {
    look_before(call, worth_measuring(call, [&] { return get_key(library, context_key()); }));
}
void record(ev::CodeLoad, Call& call, CUresult r, CUfunction*, CUmodule module, const char*) {
    got(call, r == CUDA_SUCCESS, module);
}
void record(ev::CodeLoad, Call& call, CUresult r, CUfunction*, CUkernel kernel) {
    // The kernel's library is asked only when something was taken: a second driver call on a rare path.
    if (looked()) got(call, r == CUDA_SUCCESS, r == CUDA_SUCCESS ? library_of_kernel(kernel) : nullptr);
}
void record(ev::CodeLoad, Call& call, CUresult r, CUmodule*, CUlibrary library) { got(call, r == CUDA_SUCCESS, library); }

}  // namespace cumemaudit::shim
