// The events of contexts: their beginning (the primary context retained while inactive, or one created),
// what the driver frees at their end, and what they reserve besides allocations — the cost measured around
// their creation, the kernel stack that cuCtxSetLimit sets, and the launches refused for want of stack.
#include "shim/record/events.hpp"

#include "common/heap_bytes.hpp"
#include "shim/record/oom_watch.hpp"
#include "shim/record/recorder.hpp"
#include "shim/services/context_query.hpp"
#include "shim/services/driver_query.hpp"
#include "shim/services/nvml_query.hpp"
#include "shim/services/wall_clock.hpp"

namespace cumemaudit::shim {
namespace {

// Before the driver: whether the context begins here, and what NVML charged this process on the device.
struct Before {
    bool begins = false;
    std::uint64_t charged = 0;
};
thread_local Before t_before;

void look_before(CUdevice dev, bool begins) {
    t_before.begins = begins;
    t_before.charged = begins ? nvml_processes(dev, false).self : 0;
}

// After it: the context began; its cost is what NVML charges this process more now.
void began(Call& call, CUcontext ctx, CUdevice dev, bool primary, bool green = false) {
    Recorder& rec = call.recorder();
    rec.device_seen(dev);
    if (!t_before.begins || ctx == nullptr) return;
    const DeviceProcesses after = nvml_processes(dev, false);
    history::Context facts;
    facts.step = rec.timeline().last_step();
    facts.time_ns = wall_clock_ns();
    facts.site = call.site();
    facts.green = green;
    rec.contexts().made(ctx, dev, primary, after.listed, t_before.charged, after.self, std::move(facts));
}

// The driver freed what the ended context owned: the ledger forgets what the driver no longer knows, and
// the timeline keeps it as one event (never as held at exit).
// An array is never put to the driver: its handle may name a freed object (array_book.hpp).
void forget_what_the_driver_freed(Call& call, int device, CUcontext ctx) {
    ArrayBook& arrays = call.recorder().arrays();
    std::vector<ledger::LeakRow> freed = call.recorder().ledger().forget_freed_by_driver([&](std::uint64_t ptr, ledger::Kind kind) {
        return kind == ledger::Kind::array ? !arrays.ended_with(ptr, ctx) : driver_knows_pointer(ptr);
    });
    if (!freed.empty()) call.recorder().timeline().context_ended(call.site(), device, std::move(freed));
}

void context_ended(Call& call, int device, CUcontext ctx) {
    call.recorder().contexts().ended(ctx);
    call.recorder().modules().context_ended(ctx);
    forget_what_the_driver_freed(call, device, ctx);
    call.recorder().managed().forget_freed_by_driver([](std::uint64_t base) { return driver_knows_pointer(base); });
}

// A launch the driver refused for lack of memory: the kernel, and the stack it needed beyond the limit.
void stack_refused(Call& call, CUresult r, CUfunction f) {
    KernelFacts k = kernel_facts(f);
    const std::uint64_t limit = stack_limit_of(current_context());
    const std::uint64_t needs = k.local_bytes_per_thread > 0 ? static_cast<std::uint64_t>(k.local_bytes_per_thread) : 0;
    const std::uint64_t bytes = needs > limit ? (needs - limit) * device_threads(current_device()) : 0;
    if (launch_out_of_memory(call, r, bytes, std::move(k))) call.recorder().report_due();
}

// The driver refuses the first launch of a kernel that calls malloc, when its context's device heap does not
// fit in free memory, with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (measured), the answer it also gives a block
// too large for the kernel's registers. Only a heap larger than free memory, for a block the kernel can run,
// makes it an out-of-memory moment.
void heap_refused(Call& call, CUresult r, CUfunction f, std::uint64_t block_threads) {
    const std::uint64_t limit = limit_of(current_context(), CU_LIMIT_MALLOC_HEAP_SIZE);
    const DriverMemory m = driver_memory();
    if (limit == 0 || !m.known || m.total - m.used >= heap_reservation(limit)) return;
    KernelFacts k = kernel_facts(f);
    if (k.max_threads_per_block >= 0 && block_threads > static_cast<std::uint64_t>(k.max_threads_per_block)) return;
    if (launch_out_of_memory(call, r, heap_reservation(limit), std::move(k), static_cast<std::int64_t>(limit)))
        call.recorder().report_due();
}

// A launch recorded: a kernel's first (what it loaded is measured), or a refusal.
void launch_answered(Call& call, CUresult r, CUfunction f, std::uint64_t block_threads) {
    launch_took(call, r, f);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) stack_refused(call, r, f);
    if (r == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES) heap_refused(call, r, f, block_threads);
}

}  // namespace

std::uint64_t stack_growth_bytes(CUlimit limit, std::uint64_t value) {
    if (limit != CU_LIMIT_STACK_SIZE) return 0;  // the heap and the FIFO are reserved at a later launch
    const std::uint64_t now = stack_limit_of(current_context());
    return value > now ? (value - now) * device_threads(current_device()) : 0;
}

void prepare(ev::CtxRetain, Call&, CUcontext*, CUdevice dev) { look_before(dev, !primary_context_active(dev)); }
void record(ev::CtxRetain, Call& call, CUresult r, CUcontext* ctx, CUdevice dev) {
    if (r != CUDA_SUCCESS || ctx == nullptr) return;
    call.recorder().arrays().primary_context(dev, *ctx);
    began(call, *ctx, dev, true);
}

void prepare(ev::CtxCreate, Call&, CUcontext*, unsigned int, CUdevice dev) { look_before(dev, true); }
void prepare(ev::CtxCreate, Call&, CUcontext*, CUexecAffinityParam*, int, unsigned int, CUdevice dev) { look_before(dev, true); }
void prepare(ev::CtxCreate, Call&, CUcontext*, CUctxCreateParams*, unsigned int, CUdevice dev) { look_before(dev, true); }
void record(ev::CtxCreate, Call& call, CUresult r, CUcontext* ctx, unsigned int, CUdevice dev) {
    if (r == CUDA_SUCCESS && ctx != nullptr) began(call, *ctx, dev, false);
}
void record(ev::CtxCreate, Call& call, CUresult r, CUcontext* ctx, CUexecAffinityParam*, int, unsigned int, CUdevice dev) {
    if (r == CUDA_SUCCESS && ctx != nullptr) began(call, *ctx, dev, false);
}
void record(ev::CtxCreate, Call& call, CUresult r, CUcontext* ctx, CUctxCreateParams*, unsigned int, CUdevice dev) {
    if (r == CUDA_SUCCESS && ctx != nullptr) began(call, *ctx, dev, false);
}

// A green context's handle stands for it in the book; it is never put to the driver as a context.
void prepare(ev::GreenCtxCreate, Call&, CUgreenCtx*, CUdevResourceDesc, CUdevice dev, unsigned int) { look_before(dev, true); }
void record(ev::GreenCtxCreate, Call& call, CUresult r, CUgreenCtx* ctx, CUdevResourceDesc, CUdevice dev, unsigned int) {
    if (r == CUDA_SUCCESS && ctx != nullptr) began(call, reinterpret_cast<CUcontext>(*ctx), dev, false, true);
}

// The driver keeps what a green context's creation took past its destroy (measured): the book keeps it too,
// until its device's primary context ends. What the driver freed with it, the ledger forgets.
void record(ev::GreenCtxDestroy, Call& call, CUresult r, CUgreenCtx ctx) {
    if (r != CUDA_SUCCESS) return;
    call.recorder().contexts().green_destroyed(reinterpret_cast<CUcontext>(ctx));
    forget_what_the_driver_freed(call, -1, nullptr);
}

void record(ev::CtxReset, Call& call, CUresult r, CUdevice dev) {
    if (r == CUDA_SUCCESS) context_ended(call, dev, call.recorder().arrays().primary_of(dev));
}

void record(ev::CtxRelease, Call& call, CUresult r, CUdevice dev) {
    // Only the last release resets the context; the driver says whether this was it.
    if (r == CUDA_SUCCESS && !primary_context_active(dev)) context_ended(call, dev, call.recorder().arrays().primary_of(dev));
}

void record(ev::CtxDestroy, Call& call, CUresult r, CUcontext ctx) {
    if (r == CUDA_SUCCESS) context_ended(call, -1, ctx);
}

void record(ev::Limit, Call& call, CUresult r, CUlimit limit, size_t) {
    if (r != CUDA_SUCCESS || limit != CU_LIMIT_STACK_SIZE) return;
    const CUcontext ctx = current_context();
    call.recorder().contexts().stack_set(ctx, stack_limit_of(ctx), call.site());  // the driver rounds the value
}

void record(ev::Launch, Call& call, CUresult r, CUfunction f, unsigned, unsigned, unsigned, unsigned bx, unsigned by,
            unsigned bz, unsigned, CUstream, void**, void**) {
    launch_answered(call, r, f, std::uint64_t{bx} * by * bz);
}
void record(ev::Launch, Call& call, CUresult r, const CUlaunchConfig* config, CUfunction f, void**, void**) {
    const std::uint64_t threads = config == nullptr ? 0 : std::uint64_t{config->blockDimX} * config->blockDimY * config->blockDimZ;
    launch_answered(call, r, f, threads);
}
void record(ev::Launch, Call& call, CUresult r, CUfunction f, unsigned, unsigned, unsigned, unsigned bx, unsigned by,
            unsigned bz, unsigned, CUstream, void**) {
    launch_answered(call, r, f, std::uint64_t{bx} * by * bz);
}

}  // namespace cumemaudit::shim
