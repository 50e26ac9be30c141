// enforcer: enforce mode's table, one per Recorder (Recorder::enforcer()), used only while
// Recorder::enforcing(): the virtual handle values the program was given and the real ones behind them, the
// allocations a range free left unreachable (looked at again before the next allocation), and what the
// shim reclaimed, by site. What each entry point does with it is enforce.hpp.
#pragma once

#include "ledger/ledger.hpp"
#include "history/history.hpp"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace cumemaudit::shim {

class Enforcer {
public:
    // A handle value the program holds. How many references stand behind it is the ledger's to count (one
    // refcount model); kept here is only the real value it stands for and `reclaimed`: references the shim
    // released for it, which the program's own late releases use up. It translates while it is its real
    // value's current virtual value.
    struct Virtual {
        std::uint64_t real = 0;
        std::uint32_t reclaimed = 0;
    };
    struct SiteKey {
        const char* api;
        ledger::TraceId trace;
        ledger::OwnerId owner;
        friend bool operator<(const SiteKey& a, const SiteKey& b) {
            return std::tie(a.api, a.trace, a.owner) < std::tie(b.api, b.trace, b.owner);
        }
    };
    // An allocation whose last mapped range was freed while references were held, and the thread that freed it.
    struct Pending {
        std::uint64_t id;
        std::uint64_t thread;
    };
    // VMM calls are rare and slow (tens of µs): one mutex keeps the two maps consistent.
    struct State {
        std::mutex mu;
        std::uint64_t next = 1;
        std::unordered_map<std::uint64_t, Virtual> virtuals;       // virtual value → what it stands for
        std::unordered_map<std::uint64_t, std::uint64_t> current;  // live real value → its virtual value
        std::map<SiteKey, history::Reclaim> reclaimed;
        std::vector<Pending> pending;          // allocations left unreachable by a range free, to look at again
        std::atomic<bool> any_pending{false};  // read without the lock on every allocation
    };

    Enforcer() : state_(std::make_unique<State>()) {}
    State& state() { return *state_; }
    // What enforce reclaimed, by site.
    void copy_to(history::History&) const;

private:
    std::unique_ptr<State> state_;
};

}  // namespace cumemaudit::shim
