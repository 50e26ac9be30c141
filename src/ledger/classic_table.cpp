#include "classic_table.hpp"

#include <sched.h>

namespace cumemaudit::ledger::detail {

void ClassicTable::SpinLock::lock() noexcept {
    for (int spins = 0; held_.exchange(true, std::memory_order_acquire); ++spins) {
        while (held_.load(std::memory_order_relaxed)) {
            if (spins++ >= 64) sched_yield();
#if defined(__x86_64__)
            else __builtin_ia32_pause();
#endif
        }
    }
}

ClassicTable::ClassicTable() {
    for (Shard& s : shards_) {
        s.slots = new Slot[kInitialSlots]();
        s.mask = kInitialSlots - 1;
    }
}

ClassicTable::~ClassicTable() {
    for (Shard& s : shards_) delete[] s.slots;
}

ClassicTable::Slot* ClassicTable::find(const Shard& s, std::uint64_t ptr) const {
    for (std::uint32_t i = home(s, ptr);; i = (i + 1) & s.mask) {
        if (s.slots[i].ptr == ptr) return &s.slots[i];
        if (s.slots[i].ptr == 0) return nullptr;  // at most half full: a probe always ends
    }
}

// Backward-shift deletion: later slots of the same probe run move up, so no tombstone is ever left and a
// probe still ends at the first empty slot.
void ClassicTable::remove(Shard& s, Slot* gone) {
    std::uint32_t hole = static_cast<std::uint32_t>(gone - s.slots);
    for (std::uint32_t i = (hole + 1) & s.mask; s.slots[i].ptr != 0; i = (i + 1) & s.mask) {
        const std::uint32_t h = home(s, s.slots[i].ptr);
        // Slot i may fill the hole unless its home lies cyclically in (hole, i].
        if (((i - h) & s.mask) >= ((i - hole) & s.mask)) {
            s.slots[hole] = s.slots[i];
            hole = i;
        }
    }
    s.slots[hole] = Slot{};
    --s.used;
}

void ClassicTable::grow(Shard& s) {
    const std::uint32_t old_n = s.mask + 1, n = old_n * 2;
    Slot* const old = s.slots;
    s.slots = new Slot[n]();  // may throw: then the shard keeps its old array, unchanged
    s.mask = n - 1;
    for (std::uint32_t k = 0; k < old_n; ++k) {
        if (old[k].ptr == 0) continue;
        std::uint32_t i = home(s, old[k].ptr);
        while (s.slots[i].ptr != 0) i = (i + 1) & s.mask;
        s.slots[i] = old[k];
    }
    delete[] old;
}

std::uint8_t ClassicTable::api_index(const char* api) {
    const std::uint32_t n = hot_.apis_used.load(std::memory_order_acquire);
    for (std::uint32_t i = 0; i < n; ++i)
        if (hot_.apis[i].load(std::memory_order_relaxed) == api) return static_cast<std::uint8_t>(i);
    std::lock_guard lock(api_mu_);
    const std::uint32_t now = hot_.apis_used.load(std::memory_order_relaxed);
    for (std::uint32_t i = n; i < now; ++i)
        if (hot_.apis[i].load(std::memory_order_relaxed) == api) return static_cast<std::uint8_t>(i);
    if (now == kApis) return 0;  // full (255 distinct names: never seen): the first name stands in
    hot_.apis[now].store(api, std::memory_order_relaxed);
    hot_.apis_used.store(now + 1, std::memory_order_release);  // publishes the name to lock-free readers
    return static_cast<std::uint8_t>(now);
}

ClassicRecord ClassicTable::record_of(const Slot& s) const {
    return ClassicRecord{s.size, hot_.apis[s.api].load(std::memory_order_relaxed), s.trace, s.owner, s.kind, s.epoch};
}

std::optional<ClassicRecord> ClassicTable::insert(std::uint64_t ptr, std::uint64_t size, Kind kind, const Site& site) {
    const std::uint8_t api = api_index(site.api);
    const std::uint32_t epoch = hot_.epoch.load(std::memory_order_relaxed);
    Shard& s = shards_[shard_of(ptr)];
    std::lock_guard lock(s.mu);
    const Slot fresh{ptr, size, site.trace, epoch, site.owner, kind, api, 0};
    // One probe: it ends at ptr's record or at the empty slot where ptr goes (unless the shard must grow).
    std::uint32_t i = home(s, ptr);
    while (s.slots[i].ptr != 0 && s.slots[i].ptr != ptr) i = (i + 1) & s.mask;
    if (s.slots[i].ptr == ptr) {
        const ClassicRecord old = record_of(s.slots[i]);
        s.slots[i] = fresh;  // also clears a mark: the free in flight is done, the driver handed ptr out again
        return old;
    }
    if ((s.used + 1) * 2 > s.mask + 1) [[unlikely]] {
        grow(s);
        for (i = home(s, ptr); s.slots[i].ptr != 0;) i = (i + 1) & s.mask;
    }
    s.slots[i] = fresh;
    ++s.used;
    return std::nullopt;
}

bool ClassicTable::mark_freeing(std::uint64_t ptr) {
    Shard& s = shards_[shard_of(ptr)];
    std::lock_guard lock(s.mu);
    Slot* at = find(s, ptr);
    if (at == nullptr || at->freeing != 0) return false;  // unknown, or another free of it is in flight
    at->freeing = 1;
    return true;
}

std::optional<ClassicRecord> ClassicTable::erase(std::uint64_t ptr, bool marked) {
    Shard& s = shards_[shard_of(ptr)];
    std::lock_guard lock(s.mu);
    Slot* at = find(s, ptr);
    if (at == nullptr || (marked && at->freeing == 0)) return std::nullopt;
    const ClassicRecord old = record_of(*at);
    remove(s, at);
    return old;
}

bool ClassicTable::unmark(std::uint64_t ptr, bool marked) {
    Shard& s = shards_[shard_of(ptr)];
    std::lock_guard lock(s.mu);
    Slot* at = find(s, ptr);
    if (at != nullptr && marked) at->freeing = 0;
    return at != nullptr;
}

bool ClassicTable::contains(std::uint64_t ptr) const {
    const Shard& s = shards_[shard_of(ptr)];
    std::lock_guard lock(s.mu);
    return find(s, ptr) != nullptr;
}

void ClassicTable::clear() {
    for (Shard& s : shards_) {
        s.mu.reset();
        Slot* fresh = new Slot[kInitialSlots]();
        delete[] s.slots;
        s.slots = fresh;
        s.mask = kInitialSlots - 1;
        s.used = 0;
    }
}

}  // namespace cumemaudit::ledger::detail
