#include "shim/record/cupti_pools.hpp"

#include <atomic>

namespace cumemaudit::shim {
namespace {
std::atomic<void (*)()> g_flush{nullptr};
}  // namespace

void set_activity_flush(void (*flush)()) { g_flush.store(flush); }

void CuptiPools::absorb(const CUpti_Activity* record) {
    if (record->kind == CUPTI_ACTIVITY_KIND_MEMORY_POOL) {
        const auto* r = reinterpret_cast<const CUpti_ActivityMemoryPool3*>(record);
        std::lock_guard lock(mu_);
        if (r->memoryPoolOperationType == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED)
            by_address_.erase(r->address);
        else
            by_address_[r->address] = PoolFigures{r->size, r->utilizedSize};
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMORY2) {
        const auto* r = reinterpret_cast<const CUpti_ActivityMemory4*>(record);
        if (r->memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL) return;
        std::lock_guard lock(mu_);
        by_address_[r->memoryPoolConfig.address] = PoolFigures{r->memoryPoolConfig.pool.size, r->memoryPoolConfig.utilizedSize};
    }
}

PoolFigures CuptiPools::figures() const {
    std::lock_guard lock(mu_);
    PoolFigures sum;
    for (const auto& [address, f] : by_address_) {
        sum.reserved += f.reserved;
        sum.used += f.used;
    }
    return sum;
}

PoolFigures CuptiPools::figures_now() const {
    void (*flush)() = g_flush.load();
    if (flush == nullptr) return {};
    flush();
    return figures();
}

}  // namespace cumemaudit::shim
