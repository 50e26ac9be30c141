#include "shim/record/module_book.hpp"

#include "history/marks.hpp"

#include <algorithm>

namespace cumemaudit::shim {

std::size_t ModuleBook::site_index(const ledger::Site& site, std::uint64_t step) {
    const history::SiteKey key = history::site_key(site);
    for (std::size_t i = 0; i < sites_.size(); ++i)
        if (history::site_key(sites_[i].site) == key) return i;
    if (sites_.size() == history::kModuleSitesKept) return sites_.size() - 1;
    sites_.push_back(history::ModuleSite{.site = site, .first_step = step});
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

void ModuleBook::give_back(const void* handle, int device, std::int64_t bytes) {
    code_by_device_[device] += bytes;
    auto it = handle == nullptr ? handles_.end() : handles_.find(handle);
    if (it == handles_.end()) return;
    it->second.code_bytes += bytes;
    std::uint64_t& site_bytes = sites_[it->second.site].code_bytes;
    site_bytes = bytes > 0 ? site_bytes + static_cast<std::uint64_t>(bytes)
                           : site_bytes - std::min(site_bytes, static_cast<std::uint64_t>(-bytes));
}

void ModuleBook::took(const void* handle, int device, std::int64_t bytes, const void* ctx) {
    if (bytes == 0 || device < 0 || device >= kCodeDevices) return;
    std::lock_guard lock(mu_);
    const void* known = handles_.count(handle) != 0 ? handle : nullptr;
    give_back(known, device, bytes);
    if (ctx == nullptr) return;
    auto held = held_.find({known, ctx});
    if (held != held_.end()) held->second.bytes += bytes;
    else if (held_.size() < kTakenKept) held_.emplace(std::pair{known, ctx}, Held{device, bytes});
}

void ModuleBook::context_ended(const void* ctx) {
    std::lock_guard lock(mu_);
    for (auto it = held_.begin(); it != held_.end();)
        if (it->first.second == ctx) {
            give_back(it->first.first, it->second.device, -it->second.bytes);
            it = held_.erase(it);
        } else {
            ++it;
        }
}

bool ModuleBook::first_get(std::uint64_t key) {
    std::lock_guard lock(mu_);
    if (first_gets_.size() == kFirstGetsKept) return false;  // bounded: later gets go unmeasured
    return first_gets_.insert(key).second;
}

std::uint64_t ModuleBook::code_bytes(int device) const {
    std::lock_guard lock(mu_);
    std::int64_t sum = 0;
    for (int d = 0; d < kCodeDevices; ++d)
        if (device < 0 || d == device) sum += code_by_device_[d];
    return sum > 0 ? static_cast<std::uint64_t>(sum) : 0;  // an unload measured with another thread's free beside it
}

void ModuleBook::unloaded(const void* handle, int device, std::int64_t released, const void* ctx) {
    std::lock_guard lock(mu_);
    if (device >= 0 && device < kCodeDevices) code_by_device_[device] += released;
    // What the handle's contexts held, less what the unload gave back, is what the driver keeps with a
    // context (a heap kernel's share of it): the unloading context's until it ends.
    std::int64_t kept = released;
    if (handle != nullptr)
        for (auto it = held_.lower_bound({handle, nullptr}); it != held_.end() && it->first.first == handle;) {
            kept += it->second.bytes;
            it = held_.erase(it);
        }
    if (kept > 0 && ctx != nullptr && device >= 0 && device < kCodeDevices) {
        auto held = held_.find({nullptr, ctx});
        if (held != held_.end()) held->second.bytes += kept;
        else if (held_.size() < kTakenKept) held_.emplace(std::pair{static_cast<const void*>(nullptr), ctx}, Held{device, kept});
    }
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
    s.code_bytes -= std::min<std::uint64_t>(s.code_bytes, std::max<std::int64_t>(it->second.code_bytes, 0));
    --live_.count;
    live_.image_bytes -= it->second.image_bytes;
    handles_.erase(it);
}

history::ModulesLive ModuleBook::live() const {
    history::ModulesLive l;
    {
        std::lock_guard lock(mu_);
        l = live_;
    }
    l.code_bytes = code_bytes(-1);
    return l;
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
