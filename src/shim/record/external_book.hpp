// external_book: which mapped buffers hold each external memory object (cuImportExternalMemory). A buffer
// keeps the object's memory after the object's destroy (measured on the H200: docs/DRIVER.md, "External
// memory"), so the object's row ends at the later of its destroy and its last buffer's cuMemFree. The free
// path asks only while a buffer lives (Recorder::Hot::external_buffers).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace cumemaudit::shim {

class ExternalBook {
public:
    explicit ExternalBook(std::atomic<int>& buffers) : live_buffers_(buffers) {}
    void mapped(std::uint64_t buffer, std::uint64_t object);
    // The object's destroy: true when no buffer holds it (its row ends now); else it ends with its last buffer.
    bool destroyed(std::uint64_t object);
    // A buffer's free: the destroyed object whose last buffer it was (its row ends now), else 0.
    std::uint64_t buffer_freed(std::uint64_t buffer);

private:
    struct Object {
        int buffers = 0;
        bool destroyed = false;
    };
    std::mutex mu_;
    std::unordered_map<std::uint64_t, Object> objects_;          // those with buffers (bounded by the program's)
    std::unordered_map<std::uint64_t, std::uint64_t> buffers_;  // buffer → its object
    std::atomic<int>& live_buffers_;
};

}  // namespace cumemaudit::shim
