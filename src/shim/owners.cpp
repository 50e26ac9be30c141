#include "owners.hpp"

#include <dlfcn.h>
#include <fnmatch.h>

#include <array>
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
    return base.starts_with("libcumemaudit") || base.starts_with("libcuda.so") || base.starts_with("libcudart");
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
};
thread_local std::array<CacheEntry, 64> t_cache __attribute__((tls_model("initial-exec")));

}  // namespace

std::string owner_name_for_object(std::string_view object) {
    const std::string base(basename_of(object));
    if (base.empty()) return "unknown";
    for (const Rule& r : kRules)
        if (fnmatch(r.glob, base.c_str(), 0) == 0) return r.owner;
    return base;
}

ledger::OwnerId owner_of(std::span<const ledger::Pc> pcs, ledger::Ledger& ledger) {
    if (pcs.empty()) return 0;
    CacheEntry& slot = t_cache[(pcs[0] >> 4) % t_cache.size()];
    if (slot.pc == pcs[0] && pcs.size() == 1) return slot.owner;
    ledger::OwnerId owner = 0;
    for (ledger::Pc pc : pcs) {
        const std::string object = object_of(pc);
        if (is_intermediary(basename_of(object))) continue;
        owner = ledger.owner_id(owner_name_for_object(object));
        break;
    }
    if (pcs.size() == 1) slot = {pcs[0], owner};
    return owner;
}

}  // namespace cumemaudit::shim
