#include "timeline.hpp"

#include <algorithm>
#include <map>

namespace cumemaudit::report {

std::string step_name(const Step& s) {
    const std::string n = "step " + std::to_string(s.step);
    return is_mark(s) ? s.label + " (after " + n + ")" : n;
}

namespace {
// Every mark a report keeps, in marking order: the folded older ones, then the recent ones.
std::vector<const Step*> kept_marks(const Report& r) {
    std::vector<const Step*> out;
    for (const StepWindow& w : r.step_history)
        for (const Step& s : w.steps) out.push_back(&s);
    for (const Step& s : r.steps) out.push_back(&s);
    return out;
}
}  // namespace

Timeline timeline(const Report& r) {
    const std::vector<const Step*> marks = kept_marks(r);
    // Peak over the steps, and over the owners table too: an owner may have peaked between two marks.
    std::map<std::string, std::uint64_t> peak;
    for (const Owner& o : r.owners) peak[o.owner] = std::max(peak[o.owner], o.peak_bytes);
    for (const Step* s : marks)
        for (const auto& [owner, bytes] : s->by_owner) peak[owner] = std::max(peak[owner], bytes);

    Timeline t;
    for (const auto& [owner, bytes] : peak) t.owners.push_back(owner);
    std::stable_sort(t.owners.begin(), t.owners.end(),
                     [&](const std::string& a, const std::string& b) { return peak[a] > peak[b]; });

    for (const Step* s : marks) {
        TimelinePoint p{s, step_name(*s), {}, 0};
        for (const std::string& owner : t.owners) {
            const auto it = s->by_owner.find(owner);
            p.owner_bytes.push_back(it == s->by_owner.end() ? 0 : it->second);
            p.tracked_bytes += p.owner_bytes.back();
        }
        t.points.push_back(std::move(p));
    }
    if (!marks.empty()) t.first_time_ns = marks.front()->time_ns;
    return t;
}

const Step* find_step(const Report& r, const std::string& key) {
    const std::vector<const Step*> marks = kept_marks(r);
    for (auto it = marks.rbegin(); it != marks.rend(); ++it) {
        if ((*it)->label == key || (!is_mark(**it) && std::to_string((*it)->step) == key)) return *it;
    }
    return nullptr;
}

}  // namespace cumemaudit::report
