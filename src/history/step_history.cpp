#include "history/step_history.hpp"

#include <algorithm>

namespace cumemaudit::history {
namespace {

std::uint64_t level(const Step& s) {
    if (s.driver.used != 0) return s.driver.used;
    std::uint64_t tracked = 0;
    for (const auto& [owner, bytes] : s.live_by_owner) tracked += bytes;
    return tracked;
}

bool same_mark(const Step& a, const Step& b) { return a.time_ns == b.time_ns && a.step == b.step && a.label == b.label; }

}  // namespace

StepHistory::StepHistory(std::size_t recent, std::size_t windows) : recent_cap_(std::max<std::size_t>(recent, 1)), windows_cap_(windows) {}

void StepHistory::add(Step s) {
    ++marks_;
    recent_.push_back(std::move(s));
    if (recent_.size() <= recent_cap_) return;
    Step oldest = std::move(recent_.front());
    recent_.pop_front();
    if (windows_cap_ != 0) fold(std::move(oldest));
}

StepHistory::Window StepHistory::merged(Window a, const Window& b) {
    a.marks += b.marks;
    a.last = b.last;
    if (level(b.low) < level(a.low)) a.low = b.low;
    if (level(b.high) > level(a.high)) a.high = b.high;
    return a;
}

void StepHistory::fold(Step s) {
    if (windows_.empty() || windows_.back().marks >= width_) {
        windows_.push_back(Window{1, s, s, s, s});
    } else {
        Window& w = windows_.back();
        ++w.marks;
        if (level(s) < level(w.low)) w.low = s;
        if (level(s) > level(w.high)) w.high = s;
        w.last = std::move(s);
    }
    if (windows_.size() <= windows_cap_) return;
    std::vector<Window> halved;
    for (std::size_t i = 0; i < windows_.size(); i += 2)
        halved.push_back(i + 1 < windows_.size() ? merged(std::move(windows_[i]), windows_[i + 1]) : std::move(windows_[i]));
    windows_ = std::move(halved);
    width_ *= 2;
}

std::vector<Step> StepHistory::recent() const { return {recent_.begin(), recent_.end()}; }

std::vector<StepWindow> StepHistory::windows() const {
    std::vector<StepWindow> out;
    for (const Window& w : windows_) {
        StepWindow v;
        v.first_step = w.first.step;
        v.last_step = w.last.step;
        v.marks = w.marks;
        // In the order they were marked, each once (the first mark may be the lowest too).
        std::vector<const Step*> kept = {&w.first, &w.low, &w.high, &w.last};
        std::stable_sort(kept.begin(), kept.end(), [](const Step* a, const Step* b) { return a->time_ns < b->time_ns; });
        for (const Step* s : kept)
            if (v.steps.empty() || !same_mark(v.steps.back(), *s)) v.steps.push_back(*s);
        out.push_back(std::move(v));
    }
    return out;
}

}  // namespace cumemaudit::history
