#include "shim/record/module_book.hpp"

#include "history/marks.hpp"

#include <algorithm>

namespace cumemaudit::shim {

std::size_t ModuleBook::site_index(const ledger::Site& site, std::uint64_t step) {
    const history::SiteKey key = history::site_key(site);
    for (std::size_t i = 0; i < sites_.size(); ++i)
        if (history::site_key(sites_[i].site) == key) return i;
    if (sites_.size() == history::kModuleSitesKept) return sites_.size() - 1;
    sites_.push_back(history::ModuleSite{site, 0, 0, 0, 0, 0, step});
    live_at_mark_.push_back(0);
    return sites_.size() - 1;
}

void ModuleBook::loaded(const void* handle, std::uint64_t image_bytes, const ledger::Site& site, std::uint64_t step) {
    std::lock_guard lock(mu_);
    const std::size_t i = site_index(site, step);
    history::ModuleSite& s = sites_[i];
    ++s.loads;
    ++s.live;
    s.image_bytes += image_bytes;
    s.peak_live = std::max(s.peak_live, s.live);
    ++live_.count;
    live_.image_bytes += image_bytes;
    if (handles_.size() < kModulesTracked)
        handles_[handle] = Handle{static_cast<std::uint32_t>(i), image_bytes};
    else
        ++untracked_;
}

void ModuleBook::unloaded(const void* handle) {
    std::lock_guard lock(mu_);
    auto it = handles_.find(handle);
    if (it == handles_.end()) {
        if (untracked_ == 0) return;  // loaded before the audit began, or through a call it does not see
        --untracked_;
        --live_.count;
        return;
    }
    history::ModuleSite& s = sites_[it->second.site];
    ++s.unloads;
    --s.live;
    s.image_bytes -= it->second.image_bytes;
    --live_.count;
    live_.image_bytes -= it->second.image_bytes;
    handles_.erase(it);
}

history::ModulesLive ModuleBook::live() const {
    std::lock_guard lock(mu_);
    return live_;
}

history::ModuleGrowth ModuleBook::take_growth() {
    std::lock_guard lock(mu_);
    history::ModuleGrowth most;
    for (std::size_t i = 0; i < sites_.size(); ++i) {
        const history::ModuleSite& s = sites_[i];
        if (s.live > live_at_mark_[i] && s.live - live_at_mark_[i] > most.count) {
            most.site = s.site;
            most.count = s.live - live_at_mark_[i];
        }
        live_at_mark_[i] = s.live;
    }
    return most;
}

void ModuleBook::copy_to(std::vector<history::ModuleSite>& out) const {
    std::lock_guard lock(mu_);
    out = sites_;
}

}  // namespace cumemaudit::shim
