#include "classic_table.hpp"

namespace cumemaudit::ledger::detail {

std::optional<ClassicRecord> ClassicTable::insert(std::uint64_t ptr, const ClassicRecord& rec) {
    Shard& s = shards_[shard_of(ptr)];
    std::lock_guard lock(s.mu);
    auto [it, inserted] = s.map.try_emplace(ptr, rec);
    if (inserted) return std::nullopt;
    const ClassicRecord old = it->second;
    it->second = rec;
    return old;
}

std::optional<ClassicRecord> ClassicTable::erase(std::uint64_t ptr) {
    Shard& s = shards_[shard_of(ptr)];
    std::lock_guard lock(s.mu);
    auto it = s.map.find(ptr);
    if (it == s.map.end()) return std::nullopt;
    const ClassicRecord old = it->second;
    s.map.erase(it);
    return old;
}

bool ClassicTable::contains(std::uint64_t ptr) const {
    const Shard& s = shards_[shard_of(ptr)];
    std::lock_guard lock(s.mu);
    return s.map.count(ptr) != 0;
}

void ClassicTable::clear() {
    for (Shard& s : shards_) {
        std::lock_guard lock(s.mu);
        s.map = {};  // release the buckets too: a fork child should not inherit the parent's footprint
    }
}

}  // namespace cumemaudit::ledger::detail
