// external_book: which mapped buffers hold each external memory object (cuImportExternalMemory). A buffer
// keeps the object's memory after the object's destroy (measured on the H200: docs/DRIVER.md, "External
// memory"), so the object's row ends at the later of its destroy and its last buffer's cuMemFree. The free
// path asks only while a buffer lives (Recorder::Hot::external_buffers).
//
// An object is named by its ledger record: its address and that record's stamp (Ledger::stamp_of). The
// address alone is not enough: the driver may hand a destroyed object's address to a new import while the
// old object's buffers still live, and the old object's end must not take the new one's row.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace cumemaudit::shim {

class ExternalBook {
public:
    struct Object {
        std::uint64_t address = 0;
        std::uint32_t stamp = 0;  // its ledger record's; 0: none known (the import came before the audit)
        auto operator<=>(const Object&) const = default;
    };

    explicit ExternalBook(std::atomic<int>& buffers) : live_buffers_(buffers) {}
    void mapped(std::uint64_t buffer, Object object);
    // The object's destroy: true when no buffer holds it (its row ends now); else it ends with its last buffer.
    bool destroyed(Object object);
    // A buffer's free: the destroyed object whose last buffer it was (its row ends now), else address 0.
    Object buffer_freed(std::uint64_t buffer);

private:
    struct Holders {
        int buffers = 0;
        bool destroyed = false;
    };
    std::mutex mu_;
    std::map<Object, Holders> objects_;                  // those with buffers (bounded by the program's)
    std::unordered_map<std::uint64_t, Object> buffers_;  // buffer → its object
    std::atomic<int>& live_buffers_;
};

}  // namespace cumemaudit::shim
