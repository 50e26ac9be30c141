// arena_stage: the arenas other frameworks keep on the device (CuPy's memory pool, JAX's allocator), as the
// Python helper hands them over (cumemaudit_arena) just before a step: staged for that mark, and kept as of
// the last mark for an out-of-memory record (a framework's own refusal reaches the shim as a refused
// allocation, with no helper call before it). One figure per arena name; bounded: at most kKept names.
#pragma once

#include "common/thread_annotations.hpp"
#include "history/types.hpp"

#include <vector>

namespace cumemaudit::shim {

class ArenaStage {
public:
    static constexpr std::size_t kKept = 16;
    void stage(history::Arena a) {
        MutexLock lock(mu_);
        for (history::Arena& s : staged_)
            if (s.arena == a.arena) return void(s = std::move(a));
        if (staged_.size() < kKept) staged_.push_back(std::move(a));
    }
    // For a mark: what was staged since the last one (empty: no helper call), kept as the last.
    std::vector<history::Arena> take() {
        MutexLock lock(mu_);
        if (!staged_.empty()) last_.swap(staged_);
        staged_.clear();
        return last_;
    }
    std::vector<history::Arena> last() const {
        MutexLock lock(mu_);
        return last_;
    }

private:
    mutable Mutex mu_;
    std::vector<history::Arena> staged_ GUARDED_BY(mu_);
    std::vector<history::Arena> last_ GUARDED_BY(mu_);
};

}  // namespace cumemaudit::shim
