// capture_book: the last capture profile the Python helper handed over (cumemaudit_capture_profile and its
// rows, cumemaudit_capture_hole), kept for the report as it came: the helper has already named each free
// block's line from PyTorch's history. A new profile replaces the last; bounded: history::kCaptureHolesKept
// rows.
#pragma once

#include "common/thread_annotations.hpp"
#include "history/history.hpp"

#include <vector>

namespace cumemaudit::shim {

class CaptureBook {
public:
    void begin(std::uint64_t trace_entries) {
        MutexLock lock(mu_);
        trace_entries_ = trace_entries;
        rows_.clear();
    }
    void add(history::CaptureHole row) {
        MutexLock lock(mu_);
        if (rows_.size() < history::kCaptureHolesKept) rows_.push_back(std::move(row));
    }
    void copy_to(history::History& h) const {
        MutexLock lock(mu_);
        h.capture_trace_entries = trace_entries_;
        h.capture_holes = rows_;
    }

private:
    mutable Mutex mu_;
    std::uint64_t trace_entries_ GUARDED_BY(mu_) = 0;
    std::vector<history::CaptureHole> rows_ GUARDED_BY(mu_);
};

}  // namespace cumemaudit::shim
