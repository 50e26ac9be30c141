#include "shim/record/recorder.hpp"

#include "shim/record/export_key.hpp"
#include "shim/services/driver_query.hpp"

#include <bit>

namespace cumemaudit::shim {

Recorder::Recorder(const Options& o, std::uint64_t generation)
    : hot_{.generation = generation,
           .stack_depth = o.stack_depth,
           .vmm_stack_depth = o.vmm_stack_depth,
           .python_depth = o.python_depth,
           .python_frames = o.python_frames,
           .enforcing = o.mode == options::Mode::enforce,
           .cupti_only = o.backend == options::Backend::cupti},
      options_(o),
      timeline_(ledger_, options_, symbolizer_, hot_.captures),
      oom_(hot_.oom_waiting) {}

int Recorder::call_device() const {
    const std::uint64_t m = hot_.devices.load(std::memory_order_relaxed);
    if (m == 0) return -1;
    if ((m & (m - 1)) == 0) return std::countr_zero(m);
    return current_device();
}

history::Recording Recorder::snapshot(ledger::Moment moment) {
    history::Recording r;
    r.book = &ledger_;
    r.ledger = ledger_.snapshot(moment, [](int fd, const ledger::ExportKey& key) { return fd_still_open(fd, key); });
    if (several_devices()) {
        const std::uint64_t devices = hot_.devices.load(std::memory_order_relaxed);
        for (int d = 0; d < 64; ++d)
            if (devices & (std::uint64_t{1} << d)) r.owners_by_device[d] = ledger_.owners_on_device(d);
    }
    timeline_.copy_to(r.history);
    oom_.copy_to(r.history);
    pools_.copy_to(r.history);
    enforcer_.copy_to(r.history);
    contexts_.copy_to(r.history.contexts);
    modules_.copy_to(r.history.modules);
    captures_.copy_to(r.history);
    return r;
}

}  // namespace cumemaudit::shim
