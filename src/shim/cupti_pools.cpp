#include "cupti_pools.hpp"

#include <map>
#include <mutex>

namespace cumemaudit::shim {
namespace {

struct Pools {
    std::mutex mu;  // records arrive in buffers from CUPTI's thread; marks read the sums
    std::map<std::uint64_t, PoolFigures> by_address;
};

Pools& pools() {
    static Pools* p = new Pools;  // used until _exit
    return *p;
}

}  // namespace

void absorb_activity(const CUpti_Activity* record) {
    Pools& p = pools();
    if (record->kind == CUPTI_ACTIVITY_KIND_MEMORY_POOL) {
        const auto* r = reinterpret_cast<const CUpti_ActivityMemoryPool3*>(record);
        std::lock_guard lock(p.mu);
        if (r->memoryPoolOperationType == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED)
            p.by_address.erase(r->address);
        else
            p.by_address[r->address] = PoolFigures{r->size, r->utilizedSize};
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMORY2) {
        const auto* r = reinterpret_cast<const CUpti_ActivityMemory4*>(record);
        if (r->memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL) return;
        std::lock_guard lock(p.mu);
        p.by_address[r->memoryPoolConfig.address] =
            PoolFigures{r->memoryPoolConfig.pool.size, r->memoryPoolConfig.utilizedSize};
    }
}

PoolFigures pool_figures() {
    Pools& p = pools();
    std::lock_guard lock(p.mu);
    PoolFigures sum;
    for (const auto& [address, f] : p.by_address) {
        sum.reserved += f.reserved;
        sum.used += f.used;
    }
    return sum;
}

}  // namespace cumemaudit::shim
