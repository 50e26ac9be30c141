// shared_ranges: classic device memory shared outside its allocation — legacy IPC handles this process
// exported or opened, and dma-buf fds of classic ranges. The driver keeps such memory while a peer holds it
// open or an fd is open, after the program's own free (measured on the H200), so a free alone no longer
// ends it. Each record remembers the classic record it was made for (its stamp): a later allocation at the
// same address is another one. Rare calls (a few per buffer, at set-up): one mutex, and never on the
// allocation path; at most kMaxShared records of each kind, the oldest dropped first.
#pragma once

#include "ledger/types.hpp"

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

namespace cumemaudit::ledger::detail {

class ClassicTable;
struct ClassicRecord;
class LeakRows;

class SharedRanges {
public:
    static constexpr std::size_t kMaxShared = 4096;
    explicit SharedRanges(const ClassicTable& classic) : classic_(classic) {}

    void ipc_exported(std::uint64_t ptr, const ExportKey&, const Site&);
    void ipc_opened(std::uint64_t ptr, const ExportKey&, const Site&);
    void dma_buf(std::uint64_t ptr, int fd, const ExportKey&, const Site&);

    // Open-export rows for classic memory freed by the program that an open dma-buf fd still holds, and the
    // IPC shares for the report (exports: released once freed; imports: those still open).
    void collect(LeakRows& rows, Summary&, std::vector<ShareRow>& exports, std::vector<ShareRow>& imports) const;
    // Freed classic allocations open dma-buf fds keep, once each, with the first fd's site (device -1: all).
    void pinned(int device, const std::function<void(const Site&, Kind, std::uint64_t)>& each) const;
    void forget_closed(const ExportProbe& still_open);  // drops dma-bufs whose fd is closed, and what ended
    void clear();  // one thread alive

private:
    struct Shared {
        std::uint64_t ptr = 0, bytes = 0;
        std::uint32_t stamp = 0;  // of the classic record it was made for
        Kind kind = Kind::classic;
        int device = -1;  // of the classic record
        int fd = -1;
        ExportKey key;
        Site site;
        std::uint64_t id = 0;  // a leak row's member: freed addresses are handed out again, ids are not
    };
    bool live(const Shared& s) const;  // the classic record it was made for is still there
    // The record of the allocation holding ptr and its stamp (0: none); ptr becomes its base.
    std::uint32_t containing(std::uint64_t& ptr, ClassicRecord* out) const;
    static void keep(std::deque<Shared>& list, Shared s);

    const ClassicTable& classic_;
    mutable std::mutex mu_;
    std::deque<Shared> exports_, opens_, dma_bufs_;
    // Members' ids, with the top bit set: never a VMM allocation's id (a count) nor a pointer.
    std::uint64_t next_id_ = 1ull << 63;
};

}  // namespace cumemaudit::ledger::detail
