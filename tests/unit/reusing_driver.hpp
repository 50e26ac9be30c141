// reusing_driver: a stand-in for the driver's allocator in the ledger's thread tests. It hands a freed
// pointer out again at once (last freed, first handed out), as the real driver does, so one thread's free
// races another thread's allocation of the same value.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

namespace ledger_test {

class ReusingDriver {
public:
    std::uint64_t alloc() {
        std::lock_guard lock(mu_);
        if (free_list_.empty()) return next_ += 512;
        const std::uint64_t p = free_list_.back();
        free_list_.pop_back();
        return p;
    }
    void free(std::uint64_t p) {
        std::lock_guard lock(mu_);
        free_list_.push_back(p);
    }

private:
    std::mutex mu_;
    std::vector<std::uint64_t> free_list_;
    std::uint64_t next_ = 0x10000;
};

}  // namespace ledger_test
