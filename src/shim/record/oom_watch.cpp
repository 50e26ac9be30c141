#include "shim/record/oom_watch.hpp"

#include "shim/record/marking.hpp"

#include "history/oom_breakdown.hpp"
#include "ledger/types.hpp"

#include "shim/record/events.hpp"
#include "shim/record/export_key.hpp"
#include "shim/record/recorder.hpp"
#include "shim/services/driver_query.hpp"
#include "shim/services/wall_clock.hpp"

namespace cumemaudit::shim {

namespace {

// Memory the driver took back before it refused: a return at the refused call.
void taken_back(Recorder& a, const char* what, const char* api, int device, std::uint64_t bytes, const ledger::Site& site) {
    history::Return ret;
    ret.what = what;
    ret.why = "refusal";
    ret.api = api;
    ret.device = device;
    ret.time_ns = wall_clock_ns();
    ret.bytes = bytes;
    a.timeline().memory_returned(std::move(ret), site);
}

// The moment itself: the driver's figures first (closest to the refusal), then the ledger's.
// `stack_gone`: the context of a refused launch, whose stack the driver gave back before it refused.
history::Oom take_moment(Recorder& a, const char* api, const char* result, std::uint64_t bytes, const ledger::Site& site,
                         CUcontext stack_gone = nullptr) {
    // NVML's list too: the memory another process holds is often the whole answer.
    DriverMemory m = driver_memory(nullptr, WithNvml::processes);
    const ContextBook::Reserved reserved = a.contexts().reserved(a.several_devices() ? m.device : -1, stack_gone);
    // Exported fds the program closed since are learnt first: memory whose last pin was one is free, and
    // memory they no longer pin is unreachable.
    a.ledger().forget_closed_exports([](int fd, const ledger::ExportKey& key) { return fd_still_open(fd, key); });
    // The driver took idle pool memory back before it refused (measured): what was idle at the last look
    // and is gone now is a return, and the breakdown names only what is idle still.
    const PoolBook::Sums idle_before = a.pools().last(m.device);
    const PoolBook::Sums pools = look_at_pools(a, m.device);
    if (idle_before.idle() > pools.idle()) taken_back(a, "pool", api, m.device, idle_before.idle() - pools.idle(), site);
    // And the graph memory no launch held (measured): what the last mark saw and is gone now.
    const std::uint64_t graph_before = a.timeline().last_graph_reserved();
    if (m.known && graph_before > m.graph_reserved) taken_back(a, "graph_memory", api, m.device, graph_before - m.graph_reserved, site);
    const ManagedResidency::Mover mover = a.managed().largest_mover(a.several_devices() ? m.device : -1);
    history::Oom oom = history::oom_breakdown(a.ledger(), a.timeline().graphs(),
                                              {.driver_used = m.known ? m.used : 0,
                                               .pool_reserved = pools.reserved,
                                               .pool_used = pools.used,
                                               .graph_memory = m.graph_reserved,
                                               .context = reserved.context_bytes,
                                               .local_memory = reserved.local_memory_bytes,
                                               .managed_resident = managed_resident(a, m),
                                               .managed_prefetched = mover.bytes,
                                               .managed_prefetch_site = mover.site,
                                               .module_code = a.modules().code_bytes(a.several_devices() ? m.device : -1),
                                               .malloc_heap = reserved.malloc_heap_bytes,
                                               .device = a.several_devices() ? m.device : -1,
                                               .processes_listed = m.processes_listed,
                                               .other_processes = std::move(m.other_processes)});
    oom.device = m.device;
    oom.time_ns = wall_clock_ns();
    oom.step = a.timeline().last_step();
    oom.api = api;
    oom.result = result;
    oom.requested_bytes = bytes;
    oom.driver_total_bytes = m.total;
    oom.driver_free_bytes = m.total - m.used;
    oom.modules = a.modules().live();
    oom.arenas = a.arenas().last();
    return oom;
}

}  // namespace

namespace {
history::Oom refused_call(Call& call, CUresult r, std::uint64_t bytes, CUcontext stack_gone = nullptr) {
    Recorder& a = call.recorder();
    const ledger::Site site = call.full_site();
    history::Oom oom = take_moment(a, call.api(), result_name(r), bytes, site, stack_gone);
    oom.site = site;
    oom.owner = a.ledger().owner_name(site.owner);
    return oom;
}
}  // namespace

bool out_of_memory(Call& call, CUresult r, std::uint64_t bytes) {
    return call.recorder().oom_log().refused(refused_call(call, r, bytes), call.recorder().options().oom_interval_s);
}

bool launch_out_of_memory(Call& call, CUresult r, std::uint64_t bytes, KernelFacts kernel, std::int64_t heap_bytes) {
    // A refusal for want of stack gave the context's stack back; one for want of heap did not.
    history::Oom oom = refused_call(call, r, bytes, heap_bytes < 0 ? current_context() : nullptr);
    oom.kernel = std::move(kernel.name);
    oom.kernel_local_bytes_per_thread = kernel.local_bytes_per_thread;
    oom.kernel_heap_bytes = heap_bytes;
    return call.recorder().oom_log().refused(std::move(oom), call.recorder().options().oom_interval_s);
}

void allocation_succeeded(Call& call, std::uint64_t bytes) {
    call.recorder().oom_log().succeeded(call.api(), bytes, wall_clock_ns());
}

bool torch_out_of_memory(Recorder& a, std::uint64_t bytes) {
    history::Oom oom = take_moment(a, "torch", "torch.OutOfMemoryError", bytes, ledger::Site{"torch", 0, 0});
    oom.site = ledger::Site{"torch", 0, 0};
    oom.owner = ledger::kPyTorchOwner;
    return a.oom_log().torch_oom(bytes, a.torch_pools().take(), std::move(oom));
}

}  // namespace cumemaudit::shim
