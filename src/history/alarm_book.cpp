#include "history/alarm_book.hpp"

namespace cumemaudit::history {

std::optional<Alarm> AlarmBook::raise(Alarm a, std::chrono::steady_clock::time_point now) {
    const Key key{a.what, a.owner, a.site.api, a.site.trace};
    if (auto it = index_.find(key); it != index_.end()) {
        Alarm& kept = alarms_[it->second];
        ++kept.count;
        kept.bytes += a.bytes;
        kept.live_bytes = a.live_bytes;
        kept.modules += a.modules;
        kept.modules_live = a.modules_live;
        kept.last_step = a.step;
        kept.last_time_ns = a.time_ns;
        auto& logged = logged_[it->second];
        if (now - logged < interval_) return std::nullopt;
        logged = now;
        return kept;
    }
    if (alarms_.size() >= max_) {
        ++dropped_;
        return std::nullopt;
    }
    a.count = 1;
    a.last_step = a.step;
    a.last_time_ns = a.time_ns;
    index_.emplace(key, alarms_.size());
    alarms_.push_back(a);
    logged_.push_back(now);
    return a;
}

}  // namespace cumemaudit::history
