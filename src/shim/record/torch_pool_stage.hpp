// torch_pool_stage: PyTorch's pool figures as the Python helper hands them over (cumemaudit_torch_pool),
// one call per pool, waiting for what they belong to: the next step mark or PyTorch's out-of-memory
// observer, which takes them all. Bounded: a caller that never marks keeps at most kKept.
#pragma once

#include "common/thread_annotations.hpp"
#include "history/types.hpp"

#include <string>
#include <vector>

namespace cumemaudit::shim {

class TorchPoolStage {
public:
    static constexpr std::size_t kKept = 64;
    void stage(history::TorchPool p) {
        MutexLock lock(mu_);
        if (staged_.size() < kKept) staged_.push_back(std::move(p));
    }
    // The free blocks of the last pool staged under `pool`; nothing when none is.
    void blocks(const std::string& pool, std::uint64_t free_blocks, std::uint64_t largest) {
        MutexLock lock(mu_);
        for (auto it = staged_.rbegin(); it != staged_.rend(); ++it)
            if (it->pool == pool) {
                it->free_blocks = free_blocks;
                it->largest_free_block_bytes = largest;
                return;
            }
    }
    std::vector<history::TorchPool> take() {
        MutexLock lock(mu_);
        std::vector<history::TorchPool> out;
        out.swap(staged_);
        return out;
    }

private:
    Mutex mu_;
    std::vector<history::TorchPool> staged_ GUARDED_BY(mu_);
};

}  // namespace cumemaudit::shim
