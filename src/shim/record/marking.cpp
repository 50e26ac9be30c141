#include "shim/record/marking.hpp"

#include "shim/record/events.hpp"
#include "shim/record/export_key.hpp"
#include "shim/record/recorder.hpp"
#include "shim/services/driver_query.hpp"
#include "shim/services/wall_clock.hpp"

namespace cumemaudit::shim {

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
                 reserved.local_memory_bytes, reserved.stack_bytes_per_thread};
    in.pool_reserved = pools.reserved;
    in.pool_used = pools.used;
    in.torch_pools = std::move(r.torch_pools);
    in.several_devices = rec.several_devices();
    rec.timeline().mark(in);
}

}  // namespace cumemaudit::shim
