// step_history: a process's marks, bounded whatever its age. The most recent `recent` marks are kept whole; older
// ones fold into windows of consecutive marks, each keeping whole its first and last mark and the marks where
// memory was lowest and highest (driver-used bytes, else the owners' tracked bytes), so a chart of a
// week-long job still shows every peak and trough. When there are more than `windows` windows, neighbours
// merge pairwise and a window spans twice the marks: the cost stays that of recent + 4 × windows marks.
#pragma once

#include "history/types.hpp"

#include <cstdint>
#include <deque>
#include <vector>

namespace cumemaudit::history {

class StepHistory {
public:
    StepHistory(std::size_t recent, std::size_t windows);
    void add(Step s);
    std::vector<Step> recent() const;        // oldest first
    std::vector<StepWindow> windows() const;  // oldest first, before the recent marks
    std::uint64_t marks() const { return marks_; }

private:
    struct Window {
        std::uint64_t marks = 0;
        Step first, last, low, high;
    };
    void fold(Step s);
    static Window merged(Window a, const Window& b);

    std::size_t recent_cap_, windows_cap_;
    std::deque<Step> recent_;
    std::vector<Window> windows_;
    std::uint64_t width_ = 1;  // marks per full window
    std::uint64_t marks_ = 0;
};

}  // namespace cumemaudit::history
