// The pool rows' events: the pool book learns each pool, and what a trim or a destroy gave back becomes a
// return on the timeline.
#include "shim/record/events.hpp"

#include "shim/record/recorder.hpp"
#include "shim/services/driver_query.hpp"
#include "shim/services/wall_clock.hpp"

namespace cumemaudit::shim {
namespace {

thread_local PoolFigures t_before;  // a trim's or destroy's pool, as the driver described it just before

void returned(Call& call, const char* why, CUmemoryPool pool, std::uint64_t bytes) {
    if (bytes == 0) return;
    Recorder& rec = call.recorder();
    history::Return m;
    m.what = "pool";
    m.why = why;
    m.api = call.api();
    m.pool = rec.pools().id_of(pool);
    m.device = rec.pools().device_of(pool);
    m.time_ns = wall_clock_ns();
    m.bytes = bytes;
    rec.timeline().memory_returned(std::move(m), call.site());
}

}  // namespace

void record(ev::PoolCreate, Call& call, CUresult r, CUmemoryPool* pool, const CUmemPoolProps* props) {
    if (r != CUDA_SUCCESS || pool == nullptr || props == nullptr) return;
    call.recorder().pools().created(*pool, *props, call.site(), call.recorder().timeline().last_step());
}

void prepare(ev::PoolDestroy, Call&, CUmemoryPool pool) { t_before = ask_pool(pool); }

void record(ev::PoolDestroy, Call& call, CUresult r, CUmemoryPool pool) {
    const PoolFigures before = t_before;
    t_before = {};
    if (r != CUDA_SUCCESS) return;
    // Its idle memory goes now; what allocations still hold goes with their frees (measured).
    if (before.known && before.reserved > before.used) returned(call, "destroy", pool, before.reserved - before.used);
    call.recorder().pools().destroyed(pool);
}

void prepare(ev::PoolTrim, Call&, CUmemoryPool pool, size_t) { t_before = ask_pool(pool); }

void record(ev::PoolTrim, Call& call, CUresult r, CUmemoryPool pool, size_t) {
    const PoolFigures before = t_before;
    t_before = {};
    if (r != CUDA_SUCCESS || !before.known) return;
    const PoolFigures after = ask_pool(pool);
    if (after.known && after.reserved < before.reserved) returned(call, "trim", pool, before.reserved - after.reserved);
}

void record(ev::PoolSetAttribute, Call& call, CUresult r, CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
    if (r != CUDA_SUCCESS || attr != CU_MEMPOOL_ATTR_RELEASE_THRESHOLD || value == nullptr) return;
    call.recorder().pools().threshold_set(pool, *static_cast<const cuuint64_t*>(value));
}

PoolBook::Sums look_at_pools(Recorder& rec, int device) {
    const std::uint64_t step = rec.timeline().last_step();
    // The mark's device's default pool, and another device's once it holds memory: a process on one GPU of
    // eight lists one pool, not eight empty ones.
    for (const auto& [dev, pool] : default_pools())
        if (dev == device || ask_pool(pool).reserved != 0) rec.pools().seen_default(pool, dev, step);
    return rec.pools().look(ask_pool, device);
}

void record(ev::PoolImport, Call& call, CUresult r, CUmemoryPool* pool, void*, CUmemAllocationHandleType, unsigned long long) {
    if (r != CUDA_SUCCESS || pool == nullptr) return;
    call.recorder().pools().imported(*pool, call.recorder().call_device(), call.site(), call.recorder().timeline().last_step());
}

void record(ev::PoolNamed, Call& call, CUresult r, CUmemoryPool* pool, CUmemLocation* location, CUmemAllocationType type) {
    if (r != CUDA_SUCCESS || pool == nullptr || location == nullptr) return;
    call.recorder().pools().named(*pool, *location, type, call.site(), call.recorder().timeline().last_step());
}

void record(ev::PoolSetCurrent, Call& call, CUresult r, CUmemLocation* location, CUmemAllocationType type, CUmemoryPool pool) {
    if (r != CUDA_SUCCESS || location == nullptr) return;  // the driver refuses a pool of another location or type
    call.recorder().pools().named(pool, *location, type, call.site(), call.recorder().timeline().last_step());
}

}  // namespace cumemaudit::shim
