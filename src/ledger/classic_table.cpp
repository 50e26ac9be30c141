#include "classic_table.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <new>

namespace cumemaudit::ledger::detail {

ClassicTable::Writing::Writing(Shard& s) : s_(s) {
    s.version.store(s.version.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);  // odd before any slot changes
}

ClassicTable::Writing::~Writing() {
    s_.version.store(s_.version.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

void ClassicTable::put(Slot& to, const Slot& from) {
    std::atomic_ref<std::uint64_t>(to.ptr).store(from.ptr, std::memory_order_relaxed);
    std::atomic_ref<std::uint32_t>(to.stamp).store(from.stamp, std::memory_order_relaxed);
    to.size = from.size;
    to.trace = from.trace;
    to.epoch = from.epoch;
    to.owner = from.owner;
    to.kind = from.kind;
    to.api = from.api;
}

std::size_t ClassicTable::bytes_of(std::uint32_t n) {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return (std::size_t{n} * sizeof(Slot) + page - 1) / page * page;
}

ClassicTable::Slot* ClassicTable::map_slots(std::uint32_t n) {
    void* p = mmap(nullptr, bytes_of(n), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<Slot*>(p);  // zero pages: every slot empty
}

ClassicTable::ClassicTable(Owners& owners) : owners_(owners) {
    owners_.log_changes_in(log_, &ClassicTable::apply_logged, this);
    for (Shard& s : shards_) {
        s.slots.store(map_slots(kInitialSlots), std::memory_order_relaxed);
        s.mask.store(kInitialSlots - 1, std::memory_order_relaxed);
    }
}

ClassicTable::~ClassicTable() {
    for (Shard& s : shards_) {
        munmap(s.array(), bytes_of(s.size_mask() + 1));
        for (const Mapped& old : s.retired) munmap(old.slots, old.bytes);
    }
}

ClassicTable::Slot* ClassicTable::find(const Shard& s, std::uint64_t ptr) const {
    Slot* const slots = s.array();
    const std::uint32_t mask = s.size_mask();
    for (std::uint32_t i = home(mask, ptr);; i = (i + 1) & mask) {
        if (slots[i].ptr == ptr) return &slots[i];
        if (slots[i].ptr == 0) return nullptr;  // at most half full: a probe always ends
    }
}

// Backward-shift deletion: later slots of the same probe run move up, so no tombstone is ever left and a
// probe still ends at the first empty slot.
void ClassicTable::remove(Shard& s, Slot* gone) {
    Slot* const slots = s.array();
    const std::uint32_t mask = s.size_mask();
    std::uint32_t hole = static_cast<std::uint32_t>(gone - slots);
    for (std::uint32_t i = (hole + 1) & mask; slots[i].ptr != 0; i = (i + 1) & mask) {
        const std::uint32_t h = home(mask, slots[i].ptr);
        // Slot i may fill the hole unless its home lies cyclically in (hole, i].
        if (((i - h) & mask) >= ((i - hole) & mask)) {
            put(slots[hole], slots[i]);
            hole = i;
        }
    }
    put(slots[hole], Slot{});
    --s.used;
}

void ClassicTable::grow(Shard& s) {
    const std::uint32_t old_n = s.size_mask() + 1, n = old_n * 2, mask = n - 1;
    Slot* const old = s.array();
    s.retired.reserve(s.retired.size() + 1);  // may throw: then nothing has changed yet
    Slot* const fresh = map_slots(n);         // may throw: then the shard keeps its old array, unchanged
    for (std::uint32_t k = 0; k < old_n; ++k) {
        if (old[k].ptr == 0) continue;
        std::uint32_t i = home(mask, old[k].ptr);
        while (fresh[i].ptr != 0) i = (i + 1) & mask;
        fresh[i] = old[k];  // not published yet
    }
    s.slots.store(fresh, std::memory_order_release);  // before the mask: a reader's probe stays in bounds
    s.mask.store(mask, std::memory_order_release);
    // A reader without the lock may still be probing the old array: its pages go back, its mapping stays.
    madvise(old, bytes_of(old_n), MADV_DONTNEED);
    s.retired.push_back(Mapped{old, bytes_of(old_n)});
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
    return ClassicRecord{bytes_in(s), hot_.apis[s.api].load(std::memory_order_relaxed), s.trace, s.owner, s.kind, s.epoch,
                         device_in(s)};
}

void ClassicTable::insert(std::uint64_t ptr, std::uint64_t size, Kind kind, const Site& site, int device) {
    if (owners_.lock().owned_by_me() &&
        log_.append(LoggedChange{ptr, size, site.api, site.trace, site.owner, kind, device_plus_one(device)}))
        [[likely]] return;
    Owners::Hold hold(owners_);
    insert_held(ptr, size, kind, site, device_plus_one(device), 0);
}

void ClassicTable::insert_held(std::uint64_t ptr, std::uint64_t size, Kind kind, const Site& site,
                               std::uint8_t device_plus_one, std::uint32_t logged) {
    const std::uint8_t api = api_index(site.api);
    const std::uint32_t epoch = hot_.epoch.load(std::memory_order_relaxed);
    Shard& s = shards_[shard_of(ptr)];
    std::uint32_t count = (s.stamps.load(std::memory_order_relaxed) + 1) & kCount;
    if (count == 0) count = 1;  // 0 means "no record"
    s.stamps.store(count, std::memory_order_relaxed);
    const Slot fresh{ptr, pack(size, device_plus_one), site.trace, epoch, site.owner, kind, api, count | logged};
    Writing w(s);
    // One probe: it ends at ptr's record or at the empty slot where ptr goes (unless the shard must grow).
    Slot* slots = s.array();
    std::uint32_t mask = s.size_mask();
    std::uint32_t i = home(mask, ptr);
    while (slots[i].ptr != 0 && slots[i].ptr != ptr) i = (i + 1) & mask;
    if (slots[i].ptr == ptr) {
        owners_.sub(slots[i].owner, slots[i].kind, bytes_in(slots[i]));
        put(slots[i], fresh);  // a new stamp: the free in flight is done, the driver handed ptr out again
    } else {
        if ((s.used + 1) * 2 > mask + 1) [[unlikely]] {
            grow(s);  // may throw: then nothing has changed
            slots = s.array();
            mask = s.size_mask();
            for (i = home(mask, ptr); slots[i].ptr != 0;) i = (i + 1) & mask;
        }
        put(slots[i], fresh);
        ++s.used;
    }
    owners_.add(site.owner, kind, size);
}

void ClassicTable::apply_logged(void* table) {
    auto& t = *static_cast<ClassicTable*>(table);
    t.log_.take([&t](const LoggedChange& c) {
        if (c.api == nullptr) t.erase_held(c.ptr, static_cast<Ticket>(c.size));
        else t.insert_held(c.ptr, c.size, c.kind, Site{c.api, c.trace, c.owner}, c.device_plus_one, kLogged);
    });
}

ClassicTable::Ticket ClassicTable::ticket_for(std::uint64_t ptr) const {
    // Relaxed: an insert by another thread that the program saw before this free is ordered before it by
    // whatever handed the program the pointer; one made while the driver frees comes after this read.
    if (owners_.lock().owned_by_me())
        return kSince | shards_[shard_of(ptr)].stamps.load(std::memory_order_relaxed);
    return stamp_of(ptr);
}

ClassicTable::Ticket ClassicTable::stamp_of(std::uint64_t ptr) const {
    owners_.settle();  // a record the log's thread made and has not applied is still to be found
    const Shard& s = shards_[shard_of(ptr)];
    for (int attempt = 0; attempt < 4; ++attempt) {
        const std::uint32_t before = s.version.load(std::memory_order_acquire);
        if ((before & 1) != 0) continue;  // a writer is in the shard
        const std::uint32_t mask = s.mask.load(std::memory_order_acquire);
        Slot* const slots = s.slots.load(std::memory_order_acquire);
        std::uint32_t stamp = 0;
        // Bounded: slots read while a writer moves them may hold anything; the version says so after.
        for (std::uint32_t i = home(mask, ptr), n = 0; n <= mask; ++n, i = (i + 1) & mask) {
            const std::uint64_t at = std::atomic_ref<std::uint64_t>(slots[i].ptr).load(std::memory_order_relaxed);
            if (at == ptr) {
                stamp = std::atomic_ref<std::uint32_t>(slots[i].stamp).load(std::memory_order_relaxed);
                break;
            }
            if (at == 0) break;
        }
        std::atomic_thread_fence(std::memory_order_acquire);
        if (s.version.load(std::memory_order_relaxed) == before) return stamp;
    }
    Owners::Hold lock(owners_);  // writers kept changing the shard: read it under the lock
    const Slot* at = find(s, ptr);
    return at != nullptr ? at->stamp : 0;
}

void ClassicTable::erase(std::uint64_t ptr, Ticket ticket) {
    if ((ticket & kSince) != 0 && owners_.lock().owned_by_me() &&
        log_.append(LoggedChange{ptr, ticket, nullptr, 0, 0, Kind::classic, 0})) [[likely]]
        return;
    Owners::Hold hold(owners_);
    erase_held(ptr, ticket);
}

void ClassicTable::erase_held(std::uint64_t ptr, Ticket ticket) {
    Shard& s = shards_[shard_of(ptr)];
    Slot* at = find(s, ptr);
    if (at == nullptr) return;
    if ((ticket & kSince) != 0 ? !made_by(at->stamp, ticket & kCount) : ticket != 0 && at->stamp != ticket) return;
    owners_.sub(at->owner, at->kind, bytes_in(*at));
    Writing w(s);
    remove(s, at);
}

bool ClassicTable::contains(std::uint64_t ptr) const {
    const Shard& s = shards_[shard_of(ptr)];
    Owners::Hold lock(owners_);
    return find(s, ptr) != nullptr;
}

std::uint32_t ClassicTable::find_record(std::uint64_t ptr, ClassicRecord* out) const {
    const Shard& s = shards_[shard_of(ptr)];
    Owners::Hold lock(owners_);
    const Slot* slot = find(s, ptr);
    if (slot == nullptr) return 0;
    *out = record_of(*slot);
    return slot->stamp;
}

}  // namespace cumemaudit::ledger::detail
