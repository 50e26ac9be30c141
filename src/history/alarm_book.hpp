// alarm_book: the alarms of one process, bounded: one per kind, owner and site, a repeat counted on the
// first; at most `max_alarms` sites, later new ones only counted. It also says which raise is worth a log
// line: every new alarm, and a repeat once per `interval`. Time comes in from the caller.
#pragma once

#include "history/types.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace cumemaudit::history {

class AlarmBook {
public:
    AlarmBook(std::size_t max_alarms, std::chrono::seconds interval) : max_(max_alarms), interval_(interval) {}

    // `a` raised now (count 1, its step and time the first). Returns the alarm as kept when a line should
    // be logged for it (a repeat carries its count and first step), nothing otherwise.
    std::optional<Alarm> raise(Alarm a, std::chrono::steady_clock::time_point now);

    const std::vector<Alarm>& alarms() const { return alarms_; }
    std::uint64_t dropped() const { return dropped_; }

private:
    struct Key {
        AlarmKind what;
        ledger::OwnerId owner;
        const char* api;
        ledger::TraceId trace;
        friend auto operator<=>(const Key&, const Key&) = default;
    };
    std::size_t max_;
    std::chrono::seconds interval_;
    std::vector<Alarm> alarms_;
    std::vector<std::chrono::steady_clock::time_point> logged_;  // parallel to alarms_
    std::map<Key, std::size_t> index_;
    std::uint64_t dropped_ = 0;
};

}  // namespace cumemaudit::history
