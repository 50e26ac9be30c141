#include "shim/record/marking.hpp"

#include "shim/record/events.hpp"
#include "shim/record/export_key.hpp"
#include "shim/record/recorder.hpp"
#include "shim/services/driver_query.hpp"
#include "shim/services/wall_clock.hpp"

namespace cumemaudit::shim {

std::uint64_t managed_resident(Recorder& rec, const DriverMemory& m) {
    if (!m.known || !m.processes_listed) return 0;
    const std::uint64_t charged = m.process_used + m.other_processes_bytes;
    const std::uint64_t uncharged = m.used - std::min(m.used, charged);
    std::uint64_t live = 0;
    const bool one_device = !rec.several_devices() || m.device < 0;
    for (const ledger::OwnerRow& o : one_device ? rec.ledger().owners_now() : rec.ledger().owners_on_device(m.device))
        live += o.live_by_kind[static_cast<int>(ledger::Kind::managed)];
    return rec.managed().resident(one_device ? -1 : m.device, uncharged, live);
}

void mark_now(Recorder& rec, MarkRequest r) {
    const DriverMemory m = driver_memory(r.fallback, WithNvml::sums);
    const PoolBook::Sums pools = look_at_pools(rec, m.device);
    // Fds closed since the last look: memory whose last pin was one is gone, and a step must not name it.
    rec.ledger().forget_closed_exports([](int fd, const ledger::ExportKey& key) { return fd_still_open(fd, key); });
    history::MarkInput in;
    in.step = r.step;
    in.label = std::move(r.label);
    in.time_ns = wall_clock_ns();
    in.torch_allocated = r.torch_allocated;
    in.torch_reserved = r.torch_reserved;
    const ContextBook::Reserved reserved = rec.contexts().reserved(rec.several_devices() ? m.device : -1);
    in.driver = {m.known,          m.device,        m.used,
                 m.total,          m.process_used,  m.graph_used,
                 m.graph_reserved, m.other_processes_bytes, reserved.context_bytes,
                 reserved.local_memory_bytes, reserved.stack_bytes_per_thread,
                 managed_resident(rec, m),
                 rec.modules().code_bytes(rec.several_devices() ? m.device : -1),
                 reserved.malloc_heap_bytes};
    in.pool_reserved = pools.reserved;
    in.pool_used = pools.used;
    in.torch_pools = std::move(r.torch_pools);
    in.several_devices = rec.several_devices();
    in.modules = rec.modules().live();
    // A periodic sample would take the growth a step's alarm is to name.
    if (in.label != "sample") in.module_growth = rec.modules().take_growth();
    in.arenas = in.label != "sample" ? rec.arenas().take() : rec.arenas().last();
    rec.timeline().mark(in);
}

}  // namespace cumemaudit::shim
