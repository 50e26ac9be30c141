// classic_table: live classic allocations (cuMemAlloc*, async, host, managed, IPC opens) by pointer, and
// their bytes in the owners' figures. This is the hot path of PyTorch-style programs, and after a real
// driver call none of it is in cache, so what it costs is the code and cache lines it touches and its
// locked instructions (about 7 ns each). A change applied touches:
//   1. the owners' lock and totals (one line, owners.hpp), and its owner's line,
//   2. its shard's line (the version, the slot array's address, size, use count and count of inserts),
//   3. its slot's line (one 32-byte slot: pointer, size, trace, epoch, owner, kind, api, stamp),
//   4. for an allocation only, the hot line (the epoch and the first API names, read-mostly).
// The thread the lock is biased to (most programs' one allocating thread) applies nothing per call: it
// appends the change to its log (change_log.hpp), and whoever takes the lock next applies the log first, in
// order, with the code warm. Any other thread applies its change under the lock.
// No hash node is allocated or freed (open addressing with linear probing and backward-shift deletion;
// a shard's array doubles at half load, so growth is amortised and never in steady state). The one lock
// is the owners' (the table changes under it, so the bytes move with the record in one step); the order
// between "A frees p" and "B allocates p" that the driver's reuse of p demands is carried by the slot's
// stamp and the free's ticket (see ticket_for). 64 shards keep growth small and a lock-free reader's retries
// rare; a slot is 32 bytes, so a live allocation costs 64 to 128 bytes of table.
#pragma once

#include "ledger/types.hpp"
#include "owners.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace cumemaudit::ledger::detail {

struct ClassicRecord {
    std::uint64_t size;
    const char* api;
    TraceId trace;
    OwnerId owner;
    Kind kind;
    std::uint32_t epoch;  // the step it was made in (growth alarms name the sites of a step's growth)
    int device = -1;      // the device of the context it was made in (-1: not known, host memory)
    Site site() const { return Site{api, trace, owner}; }
};

class ClassicTable {
public:
    explicit ClassicTable(Owners&);
    ~ClassicTable();
    ClassicTable(const ClassicTable&) = delete;
    ClassicTable& operator=(const ClassicTable&) = delete;

    // Records ptr as live, made in the current epoch (the one it is applied in: a mark applies the log
    // first), and counts its bytes. A record ptr still had is replaced and its bytes uncounted: a free we
    // never saw, or one in flight (its ticket names the old record) that the driver has already done, since
    // it handed ptr out again.
    void insert(std::uint64_t ptr, std::uint64_t size, Kind, const Site&, int device = -1);

    // What a free takes out, named before the driver frees ptr; 0 is "whatever record ptr has then". The
    // driver hands a freed pointer out again at once, so a record that another thread makes for ptr while
    // this free is in flight must be left alone. Two kinds:
    //  - an exact ticket (any thread but the log's): the stamp of ptr's record now. Every insert stamps
    //    anew, so a later record has another stamp. Read without the lock, once the log is applied.
    //  - a ticket since (the log's thread, kSince set): the count of inserts ptr's shard has made. The free
    //    takes out ptr's record if the log's thread made it (its changes apply in the order it made them,
    //    so that record is the one it frees) or another thread made it no later than that count.
    using Ticket = std::uint32_t;
    Ticket ticket_for(std::uint64_t ptr) const;
    // The stamp of ptr's record now (0: none), the log applied: an exact ticket.
    Ticket stamp_of(std::uint64_t ptr) const;
    // After the driver freed ptr: the record the ticket names is taken out and its bytes uncounted. Ticket 0:
    // whatever record ptr has (a free seen only after the fact, as the CUPTI backend sees it).
    void erase(std::uint64_t ptr, Ticket);
    bool contains(std::uint64_t ptr) const;
    // ptr's record and its stamp; stamp 0 when there is none.
    std::uint32_t find_record(std::uint64_t ptr, ClassicRecord* out) const;

    void set_epoch(std::uint32_t e) { hot_.epoch.store(e, std::memory_order_relaxed); }

    // Visits every live record, the lock taken for one shard at a time (a snapshot, not an atomic view).
    template <class F>
    void for_each(F&& f) const {
        SpinLock::Visit visit(owners_.lock());  // from a thread other than the lock's owner: one announcement
        for (const Shard& s : shards_) {
            Owners::Hold lock(owners_);
            const Slot* slots = s.array();
            for (std::uint32_t i = 0; i <= s.size_mask(); ++i)
                if (slots[i].ptr != 0) f(slots[i].ptr, record_of(slots[i]));
        }
    }

private:
    struct Slot {
        std::uint64_t ptr;  // 0: empty (the driver never hands out a null allocation)
        std::uint64_t size;  // the low 56 bits; the top 8 hold the device + 1 (see pack), so the slot stays 32 bytes
        TraceId trace;
        std::uint32_t epoch;
        OwnerId owner;
        Kind kind;
        std::uint8_t api;     // index into hot_.apis
        std::uint32_t stamp;  // this insert's: the shard's count of inserts (never 0), kLogged if from the log
    };
    static_assert(sizeof(Slot) == 32, "two slots a cache line");

    static constexpr std::size_t kShards = 64;
    static constexpr std::uint32_t kInitialSlots = 128;  // one page: arrays are mapped, not malloc'd
    // A reader without the lock (stamp_of) sees the slots through a seqlock: `version` is odd while a
    // writer changes them, and the slots' pointer and stamp are written and read atomically. Arrays are
    // mapped pages: the one a growth replaces is given back with MADV_DONTNEED but stays mapped until the
    // table is destroyed, so a reader that raced the growth reads old slots or zeros, never unmapped
    // memory, and then sees the version moved. `slots` is published before `mask` and read after it: a
    // probe stays in bounds.
    struct Mapped {
        Slot* slots;
        std::size_t bytes;
    };
    struct alignas(64) Shard {  // own cache line: a writer's version must not move a neighbour's readers
        std::atomic<std::uint32_t> version{0};
        std::atomic<Slot*> slots{nullptr};
        std::atomic<std::uint32_t> mask{0};  // slots - 1 (a power of two)
        std::uint32_t used = 0;
        std::atomic<std::uint32_t> stamps{0};  // inserts so far (kCount bits): the last stamp given
        std::vector<Mapped> retired;  // arrays a growth replaced, their pages given back
        Slot* array() const { return slots.load(std::memory_order_relaxed); }  // under the lock
        std::uint32_t size_mask() const { return mask.load(std::memory_order_relaxed); }
    };
    // Brackets a change of a shard's slots, under the lock.
    class Writing {
    public:
        explicit Writing(Shard& s);
        ~Writing();
        Writing(const Writing&) = delete;
        Writing& operator=(const Writing&) = delete;

    private:
        Shard& s_;
    };
    static void put(Slot& to, const Slot& from);  // the fields a reader without the lock sees, atomically
    static constexpr int kDeviceShift = 56;       // no allocation reaches 64 PiB
    static std::uint8_t device_plus_one(int device) { return static_cast<std::uint8_t>(device + 1); }
    static std::uint64_t pack(std::uint64_t size, std::uint8_t device_plus_one) {
        return (size & ((std::uint64_t{1} << kDeviceShift) - 1)) | (std::uint64_t{device_plus_one} << kDeviceShift);
    }
    static std::uint64_t bytes_in(const Slot& s) { return s.size & ((std::uint64_t{1} << kDeviceShift) - 1); }
    static int device_in(const Slot& s) { return static_cast<int>(s.size >> kDeviceShift) - 1; }
    static Slot* map_slots(std::uint32_t n);       // zeroed; throws std::bad_alloc
    static std::size_t bytes_of(std::uint32_t n);

    // API names are static strings; a slot keeps a one-byte index. The epoch and the first seven names,
    // which is every classic API most programs use, share one read-mostly line.
    static constexpr std::size_t kApis = 255;
    struct alignas(64) Hot {
        std::atomic<std::uint32_t> epoch{0};
        std::atomic<std::uint32_t> apis_used{0};
        std::array<std::atomic<const char*>, kApis> apis{};
    };

    // Pointers are 256-byte or larger aligned: multiply, the top bits pick the shard, the next the slot.
    static std::uint64_t mix(std::uint64_t ptr) { return ptr * 0x9E3779B97F4A7C15ull; }
    static std::size_t shard_of(std::uint64_t ptr) { return mix(ptr) >> 58; }
    static std::uint32_t home(std::uint32_t mask, std::uint64_t ptr) { return static_cast<std::uint32_t>(mix(ptr) >> 26) & mask; }

    // A stamp is a count of inserts (kCount bits, wrapping, never 0) and whether the log applied it; a
    // ticket is a stamp, or kSince with a count.
    static constexpr std::uint32_t kCount = (1u << 30) - 1, kLogged = 1u << 30, kSince = 1u << 31;
    // Whether a record stamped `stamp` is one a ticket since `count` takes out. Counts wrap: one free's
    // driver call does not outlast 2^29 inserts into one shard.
    static bool made_by(std::uint32_t stamp, std::uint32_t count) {
        return (stamp & kLogged) != 0 || ((count - stamp) & kCount) < (1u << 29);
    }

    // Under the lock (an Owners::Hold).
    void insert_held(std::uint64_t ptr, std::uint64_t size, Kind, const Site&, std::uint8_t device_plus_one,
                     std::uint32_t logged);
    void erase_held(std::uint64_t ptr, Ticket);
    // What the log's thread appended, applied in order; for Owners::Hold.
    static void apply_logged(void* table);

    Slot* find(const Shard&, std::uint64_t ptr) const;  // under the lock
    void remove(Shard&, Slot*);                         // backward-shift deletion, under the lock
    void grow(Shard&);                                  // doubles, under the lock
    std::uint8_t api_index(const char* api);
    ClassicRecord record_of(const Slot&) const;

    Owners& owners_;  // counts the records' bytes; its lock is the table's
    ChangeLog log_;   // the changes of the lock's owner thread not yet applied
    Hot hot_;
    std::mutex api_mu_;  // registration of a new API name only
    std::array<Shard, kShards> shards_;
};

}  // namespace cumemaudit::ledger::detail
