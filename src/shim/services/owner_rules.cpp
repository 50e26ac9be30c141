#include "shim/services/owner_rules.hpp"

#include "shim/services/options_store.hpp"

#include "common/paths.hpp"
#include "ledger/types.hpp"

#include <dlfcn.h>
#include <fnmatch.h>

#include "shim/services/log.hpp"

#include <array>
#include <filesystem>
#include <vector>
#include <string>

namespace cumemaudit::shim {
namespace {

struct Rule {
    const char* glob;  // with a '/': over the whole normalised path ('*' spans directories); else the basename
    const char* owner;
};
// Real layouts: wheels under site-packages or dist-packages (a package directory, or nvidia/<lib>/lib for
// NVIDIA's wheels), an editable DeepEP build in its source tree, Triton's kernel cache, system libraries by
// name. Path rules come first: torch/_C and deep_ep/_C share a basename. They are anchored at the packages
// directory so that a checkout or virtual environment named "vllm" does not make torch's libraries vllm's.
constexpr std::array kRules = {
    Rule{"*-packages/deep_ep/*", "deepep"},          Rule{"*/deep_ep/_C.*", "deepep"},
    Rule{"hybrid_ep_cpp*", "deepep"},                Rule{"*deep_ep*", "deepep"},
    Rule{"*-packages/cuda/bindings/*", "cuda-python"}, Rule{"*-packages/cuda/core/*", "cuda-python"},
    Rule{"*-packages/cupy/*", "cupy"},               Rule{"*-packages/cupy_backends/*", "cupy"},
    Rule{"*-packages/jaxlib/*", "jax"},              Rule{"*-packages/jax_plugins/*", "jax"},
    Rule{"xla_cuda_plugin*", "jax"},                 Rule{"*-packages/vllm/*", "vllm"},
    Rule{"*-packages/nvidia/nvshmem/*", "nvshmem"},  Rule{"libnvshmem*", "nvshmem"},
    Rule{"*-packages/nvidia/nccl/*", "nccl"},        Rule{"libnccl*", "nccl"},
    Rule{"*-packages/triton/*", "triton"},           Rule{"*/.triton/cache/*", "triton"},
    Rule{"*triton*", "triton"},                      Rule{"*-packages/torch/*", ledger::kPyTorchOwner},
    Rule{"libc10*", ledger::kPyTorchOwner},     Rule{"libtorch*", ledger::kPyTorchOwner},
    Rule{"*-packages/nvidia/cublas/*", "cublas"},    Rule{"libcublas*", "cublas"},
    Rule{"*-packages/nvidia/cudnn/*", "cudnn"},      Rule{"libcudnn*", "cudnn"},
    Rule{"libcufft*", "cufft"},                      Rule{"libcusparse*", "cusparse"},
    Rule{"libcumemaudit_pool*", "cumemaudit_pool"},  // the pool's own calls, also when PyTorch drives it
};

bool matches(const std::string& glob, const std::string& path, const std::string& base) {
    return fnmatch(glob.c_str(), glob.find('/') == std::string::npos ? base.c_str() : path.c_str(), 0) == 0;
}

// Where no rule names it, the object is named after where it lives: the package directory under
// site-packages (or dist-packages), NVIDIA's wheels by <lib> in nvidia/<lib>/lib, a module sitting in
// site-packages itself by its module name; anything else by its basename.
std::string package_of(const std::string& path, const std::string& base) {
    for (const char* root : {"/site-packages/", "/dist-packages/"}) {
        const auto at = path.rfind(root);
        if (at == std::string::npos) continue;
        std::string_view rest = std::string_view(path).substr(at + std::string_view(root).size());
        std::string_view top = rest.substr(0, rest.find('/'));
        if (top.size() == rest.size()) return std::string(top.substr(0, top.find('.')));  // a module file
        if (top == "nvidia") {
            rest.remove_prefix(top.size() + 1);
            top = rest.substr(0, rest.find('/'));
            if (top.size() != rest.size()) return std::string(top);
        }
        return std::string(top);
    }
    return base;
}

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
    // dladdr gives the path as it was opened: "lib/../_C.so" and "lib//x.so" name the same file.
    const std::string path = std::filesystem::path(object).lexically_normal().string();
    const std::string base(basename(path));
    if (base.empty()) return "unknown";
    for (const auto& [glob, owner] : user_rules())
        if (matches(glob, path, base)) return owner;
    for (const Rule& r : kRules)
        if (matches(r.glob, path, base)) return r.owner;
    return package_of(path, base);
}

std::string object_of(ledger::Pc pc, std::string* function) {
    Dl_info info{};
    // The return address may sit just past the object's last byte: look one byte back.
    if (dladdr(reinterpret_cast<void*>(pc - 1), &info) == 0 || info.dli_fname == nullptr) return {};
    if (function != nullptr) *function = info.dli_sname != nullptr ? info.dli_sname : "";
    return info.dli_fname;
}

}  // namespace cumemaudit::shim
