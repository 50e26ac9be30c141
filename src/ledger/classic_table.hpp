// classic_table: live classic allocations (cuMemAlloc*, async, host, managed, IPC opens) by pointer.
// This is the hot path of PyTorch-style programs, so it is sharded by pointer (64 shards, each a mutex and
// a hash map) instead of one global lock, and a record is 32 bytes so a live allocation costs well under
// 160 bytes with the hash map's node and bucket.
#pragma once

#include "ledger.hpp"

#include <array>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace cumemaudit::ledger::detail {

struct ClassicRecord {
    std::uint64_t size;
    const char* api;
    TraceId trace;
    OwnerId owner;
    Kind kind;
    std::uint32_t epoch;  // the step it was made in (growth alarms name the sites of a step's growth)
    Site site() const { return Site{api, trace, owner}; }
};
static_assert(sizeof(ClassicRecord) == 32);

class ClassicTable {
public:
    // Returns the record the pointer had if it was still live (a free we never saw).
    std::optional<ClassicRecord> insert(std::uint64_t ptr, const ClassicRecord&);
    std::optional<ClassicRecord> erase(std::uint64_t ptr);
    bool contains(std::uint64_t ptr) const;

    // Visits every live record, one shard locked at a time (a snapshot, not an atomic view).
    template <class F>
    void for_each(F&& f) const {
        for (const Shard& s : shards_) {
            std::lock_guard lock(s.mu);
            for (const auto& [ptr, rec] : s.map) f(ptr, rec);
        }
    }
    void clear();

private:
    static constexpr std::size_t kShards = 64;
    struct alignas(64) Shard {  // own cache line: neighbouring shards' locks must not false-share
        mutable std::mutex mu;
        std::unordered_map<std::uint64_t, ClassicRecord> map;
    };
    // Pointers are 256-byte or larger aligned: multiply and take the top bits so all shards get used.
    static std::size_t shard_of(std::uint64_t ptr) { return (ptr * 0x9E3779B97F4A7C15ull) >> 58; }
    std::array<Shard, kShards> shards_;
};

}  // namespace cumemaudit::ledger::detail
