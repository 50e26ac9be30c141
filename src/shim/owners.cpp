#include "owners.hpp"

#include "options_store.hpp"

#include <dlfcn.h>
#include <fnmatch.h>

#include "log.hpp"

#include <array>
#include <memory>
#include <vector>
#include <string>

namespace cumemaudit::shim {
namespace {

struct Rule {
    const char* glob;  // over the object's basename
    const char* owner;
};
constexpr std::array kRules = {
    Rule{"libc10_cuda*", "pytorch"}, Rule{"libtorch_cuda*", "pytorch"}, Rule{"libtorch*", "pytorch"},
    Rule{"libc10*", "pytorch"},      Rule{"libnccl*", "nccl"},          Rule{"libnvshmem*", "nvshmem"},
    Rule{"*deep_ep*", "deepep"},     Rule{"libcublas*", "cublas"},      Rule{"libcudnn*", "cudnn"},
    Rule{"*triton*", "triton"},      Rule{"libcufft*", "cufft"},        Rule{"libcusparse*", "cusparse"},
};

// Objects that only pass memory on for somebody else; the owner is whoever called them.
bool is_intermediary(std::string_view base) {
    return base.starts_with("libcumemaudit.so") || base.starts_with("libcuda.so") || base.starts_with("libcudart");
}

std::string_view basename_of(std::string_view path) {
    const auto slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string object_of(ledger::Pc pc) {
    Dl_info info{};
    // The return address may sit just past the object's last byte: look one byte back.
    if (dladdr(reinterpret_cast<void*>(pc - 1), &info) == 0 || info.dli_fname == nullptr) return {};
    return info.dli_fname;
}

struct CacheEntry {
    ledger::Pc pc = 0;
    ledger::OwnerId owner = 0;
    const ledger::Ledger* ledger = nullptr;  // ids are per ledger: a fork child starts a fresh one
};
thread_local std::unique_ptr<std::array<CacheEntry, 64>> t_cache;  // heap: keeps the TLS block small

// owner_rules=glob=owner,glob=owner: the user's rules, read once, tried before the built-in ones.
const std::vector<std::pair<std::string, std::string>>& user_rules() {
    static const auto* rules = [] {
        auto* out = new std::vector<std::pair<std::string, std::string>>();  // kept until _exit
        std::string_view text = current_options().owner_rules;
        while (!text.empty()) {
            const auto comma = text.find(',');
            const std::string_view rule = text.substr(0, comma);
            text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
            const auto eq = rule.rfind('=');
            if (eq == std::string_view::npos || eq == 0 || eq + 1 == rule.size()) {
                log_warning("owner rule '{}' in CUMEMAUDIT_OPTIONS is not glob=owner; ignored", rule);
                continue;
            }
            out->emplace_back(std::string(rule.substr(0, eq)), std::string(rule.substr(eq + 1)));
        }
        return out;
    }();
    return *rules;
}

}  // namespace

std::string owner_name_for_object(std::string_view object) {
    const std::string base(basename_of(object));
    if (base.empty()) return "unknown";
    for (const auto& [glob, owner] : user_rules())
        if (fnmatch(glob.c_str(), base.c_str(), 0) == 0) return owner;
    for (const Rule& r : kRules)
        if (fnmatch(r.glob, base.c_str(), 0) == 0) return r.owner;
    return base;
}

ledger::OwnerId owner_of(std::span<const ledger::Pc> pcs, ledger::Ledger& ledger) {
    if (pcs.empty()) return 0;
    if (!t_cache) t_cache = std::make_unique<std::array<CacheEntry, 64>>();
    CacheEntry& slot = (*t_cache)[(pcs[0] >> 4) % t_cache->size()];
    if (slot.pc == pcs[0] && slot.ledger == &ledger && pcs.size() == 1) return slot.owner;
    ledger::OwnerId owner = 0;
    for (ledger::Pc pc : pcs) {
        const std::string object = object_of(pc);
        if (is_intermediary(basename_of(object))) continue;
        owner = ledger.owner_id(owner_name_for_object(object));
        break;
    }
    if (pcs.size() == 1) slot = {pcs[0], owner, &ledger};
    return owner;
}

}  // namespace cumemaudit::shim
