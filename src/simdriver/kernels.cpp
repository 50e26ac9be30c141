// Modules and launches: a module is PTX text read for its kernels (`.entry`) and the local memory each of
// their threads declares (`.local`); nothing is compiled and nothing executes. What a launch does to memory
// is the kernel stack: a kernel needing more local memory per thread than the context's stack limit raises
// the limit to it and reserves the difference for every thread the device holds, or is refused with
// CUDA_ERROR_OUT_OF_MEMORY after giving the whole stack back (docs/DRIVER.md, "Contexts, kernel stacks and
// launches").
#include "state.hpp"
#include "state_impl.hpp"

#include <cctype>
#include <cstring>
#include <optional>
#include <string_view>

namespace cumemaudit::sim {

namespace {

constexpr int kMaxThreadsPerBlock = 1024;  // an H200's (CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)

struct Kernel {
    std::string name;
    std::uint64_t local_bytes = 0;
};

// The text with its comments blanked, so a commented-out `.entry` or `.local` counts for nothing.
std::string without_comments(std::string_view text) {
    std::string out(text);
    for (std::size_t i = 0; i + 1 < out.size(); ++i) {
        if (out[i] == '/' && out[i + 1] == '/') {
            while (i < out.size() && out[i] != '\n') out[i++] = ' ';
        } else if (out[i] == '/' && out[i + 1] == '*') {
            const std::size_t end = out.find("*/", i + 2);
            const std::size_t stop = end == std::string::npos ? out.size() : end + 2;
            for (; i < stop; ++i)
                if (out[i] != '\n') out[i] = ' ';
            --i;
        }
    }
    return out;
}

bool space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
bool ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '$' || c == '%'; }

std::size_t skip_space(std::string_view s, std::size_t i) {
    while (i < s.size() && space(s[i])) ++i;
    return i;
}

// `word` at i as a whole token (not part of `ld.local.u32` or `.localx`).
bool token_at(std::string_view s, std::size_t i, std::string_view word) {
    return s.substr(i, word.size()) == word && (i == 0 || space(s[i - 1]) || s[i - 1] == '{' || s[i - 1] == ';') &&
           (i + word.size() == s.size() || space(s[i + word.size()]));
}

// The index just past the bracket that closes the one at `open`, or npos.
std::size_t past_closing(std::string_view s, std::size_t open, char opening, char closing) {
    int depth = 0;
    for (std::size_t i = open; i < s.size(); ++i) {
        if (s[i] == opening) ++depth;
        if (s[i] == closing && --depth == 0) return i + 1;
    }
    return std::string_view::npos;
}

std::uint64_t type_bytes(std::string_view t) {
    if (t == ".b8" || t == ".u8" || t == ".s8") return 1;
    if (t == ".b16" || t == ".u16" || t == ".s16" || t == ".f16" || t == ".bf16") return 2;
    if (t == ".b32" || t == ".u32" || t == ".s32" || t == ".f32" || t == ".f16x2" || t == ".bf16x2") return 4;
    if (t == ".b64" || t == ".u64" || t == ".s64" || t == ".f64") return 8;
    if (t == ".b128") return 16;
    return 0;
}

// The bytes a `.local` declaration (its `.local` taken off) declares: each variable's element size times its
// vector width and array extents, summed over a comma-separated list.
std::uint64_t declared_bytes(std::string_view decl) {
    std::uint64_t element = 0, width = 1, total = 0;
    std::size_t i = skip_space(decl, 0);
    while (i < decl.size() && decl[i] == '.') {  // .align N, .v2/.v4, the type
        std::size_t end = i + 1;
        while (end < decl.size() && ident(decl[end])) ++end;
        const std::string_view word = decl.substr(i, end - i);
        if (word == ".align") {
            end = skip_space(decl, end);
            while (end < decl.size() && std::isdigit(static_cast<unsigned char>(decl[end]))) ++end;
        } else if (word == ".v2" || word == ".v4" || word == ".v8") {
            width = static_cast<std::uint64_t>(word[2] - '0');
        } else if (const std::uint64_t b = type_bytes(word); b != 0) {
            element = b;
        }
        i = skip_space(decl, end);
    }
    while (i < decl.size()) {  // name[N][M], name, ...
        while (i < decl.size() && (ident(decl[i]) || space(decl[i]))) ++i;
        std::uint64_t count = 1;
        while (i < decl.size() && decl[i] == '[') {
            std::uint64_t n = 0;
            for (++i; i < decl.size() && std::isdigit(static_cast<unsigned char>(decl[i])); ++i) n = n * 10 + (decl[i] - '0');
            count *= n;
            while (i < decl.size() && decl[i] != ']') ++i;
            i = skip_space(decl, i + 1);
        }
        total += element * width * count;
        while (i < decl.size() && decl[i] != ',') ++i;
        if (i < decl.size()) ++i;
    }
    return total;
}

// The local memory a kernel's body declares: every `.local` statement in it, nested scopes included.
std::uint64_t local_bytes(std::string_view body) {
    std::uint64_t total = 0;
    std::size_t start = 0;
    while (start < body.size()) {
        std::size_t end = body.find(';', start);
        if (end == std::string_view::npos) end = body.size();
        std::size_t i = start;
        while (i < end && (space(body[i]) || body[i] == '{' || body[i] == '}')) ++i;
        if (token_at(body, i, ".local")) total += declared_bytes(body.substr(i + 6, end - i - 6));
        start = end + 1;
    }
    return total;
}

enum class Read { ok, not_ptx, malformed };

// The kernels of a PTX image: text whose first directive is `.version`. A cubin or fatbin is not read here.
Read read_ptx(std::string_view image, std::vector<Kernel>& kernels) {
    const std::string text = without_comments(image);
    const std::string_view s = text;
    if (!token_at(s, skip_space(s, 0), ".version")) return Read::not_ptx;
    for (std::size_t at = s.find(".entry"); at != std::string_view::npos; at = s.find(".entry", at + 1)) {
        if (!token_at(s, at, ".entry")) continue;
        std::size_t i = skip_space(s, at + 6);
        const std::size_t name_begin = i;
        while (i < s.size() && ident(s[i])) ++i;
        if (i == name_begin) return Read::malformed;
        Kernel k{std::string(s.substr(name_begin, i - name_begin))};
        i = skip_space(s, i);
        if (i < s.size() && s[i] == '(') i = past_closing(s, i, '(', ')');  // the parameters
        const std::size_t open = i == std::string_view::npos ? i : s.find('{', i);  // after .maxntid and the like
        const std::size_t close = open == std::string_view::npos ? open : past_closing(s, open, '{', '}');
        if (close == std::string_view::npos) return Read::malformed;
        k.local_bytes = local_bytes(s.substr(open + 1, close - open - 2));
        kernels.push_back(std::move(k));
        at = close - 1;
    }
    return Read::ok;
}

}  // namespace

namespace {

CUresult read_image(const char* image, std::vector<Kernel>& kernels) {
    switch (read_ptx(image, kernels)) {
        case Read::not_ptx: return CUDA_ERROR_INVALID_IMAGE;
        case Read::malformed: return CUDA_ERROR_INVALID_PTX;
        case Read::ok: break;
    }
    return CUDA_SUCCESS;
}

// A module of these kernels, for the current context to adopt (Impl::adopt_module).
std::unique_ptr<CUmod_st> module_of(std::vector<Kernel> kernels, CUlibrary library) {
    auto m = std::make_unique<CUmod_st>(CUmod_st{tls_current, {}, library});
    for (Kernel& k : kernels)
        m->functions.push_back(std::make_unique<CUfunc_st>(CUfunc_st{m.get(), std::move(k.name), k.local_bytes}));
    return m;
}

}  // namespace

CUresult SimState::module_load(CUmodule* out, const char* image) {
    std::vector<Kernel> kernels;
    // Read before the lock: reading a large image blocks no other call.
    if (CUresult r = read_image(image, kernels); r != CUDA_SUCCESS) return r;
    std::lock_guard lock(impl_->mu);
    return impl_->adopt_module(module_of(std::move(kernels), nullptr), out);
}

CUresult SimState::library_load(CUlibrary* out, const char* image) {
    std::vector<Kernel> kernels;
    if (CUresult r = read_image(image, kernels); r != CUDA_SUCCESS) return r;
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto lib = std::make_unique<CUlib_st>(CUlib_st{image, {}});
    *out = lib.get();
    s.libraries.emplace(lib.get(), std::move(lib));
    return CUDA_SUCCESS;
}

CUresult SimState::library_module(CUmodule* out, CUlibrary lib) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = s.libraries.find(lib);
    if (it == s.libraries.end()) return CUDA_ERROR_INVALID_HANDLE;
    if (auto m = it->second->modules.find(tls_current); m != it->second->modules.end()) {
        *out = m->second;
        return CUDA_SUCCESS;
    }
    std::vector<Kernel> kernels;
    read_image(it->second->image.c_str(), kernels);  // read at the load
    if (CUresult r = s.adopt_module(module_of(std::move(kernels), lib), out); r != CUDA_SUCCESS) return r;
    it->second->modules[tls_current] = *out;
    return CUDA_SUCCESS;
}

CUresult SimState::library_unload(CUlibrary lib) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = s.libraries.find(lib);
    if (it == s.libraries.end()) return CUDA_ERROR_INVALID_HANDLE;
    for (const auto& [ctx, m] : std::map<CUcontext, CUmodule>(it->second->modules)) {
        s.forget_functions(*s.modules.at(m));
        s.modules.erase(m);
    }
    s.libraries.erase(it);
    return CUDA_SUCCESS;
}

CUresult SimState::module_unload(CUmodule m) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = s.modules.find(m);
    if (it == s.modules.end()) return CUDA_ERROR_INVALID_HANDLE;
    s.forget_functions(*it->second);
    s.modules.erase(it);
    return CUDA_SUCCESS;
}

CUresult SimState::module_function(CUfunction* out, CUmodule m, const char* name) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = s.modules.find(m);
    if (it == s.modules.end()) return CUDA_ERROR_INVALID_HANDLE;
    for (const auto& f : it->second->functions) {
        if (f->name != name) continue;
        *out = f.get();
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_NOT_FOUND;
}

CUresult SimState::function_attribute(int* out, CUfunction_attribute attr, CUfunction f) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (s.functions.count(f) == 0) return CUDA_ERROR_INVALID_HANDLE;
    if (static_cast<int>(attr) < 0 || static_cast<int>(attr) >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
        case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *out = static_cast<int>(f->local_bytes); break;
        case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *out = kMaxThreadsPerBlock; break;
        default: *out = 0; break;  // registers, shared memory, versions: not modelled
    }
    return CUDA_SUCCESS;
}

CUresult SimState::function_name(const char** out, CUfunction f) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (s.functions.count(f) == 0) return CUDA_ERROR_INVALID_HANDLE;
    *out = f->name.c_str();  // lives as long as its module
    return CUDA_SUCCESS;
}

CUresult SimState::launch(CUfunction f, CUstream st, const unsigned grid[3], const unsigned block[3]) {
    if (CUresult r = stream_check(st); r != CUDA_SUCCESS) return r;
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    int dev = 0;
    if (CUresult r = s.current_device(&dev); r != CUDA_SUCCESS) return r;
    // A function of another context's module, or of one unloaded, is not a handle this context knows.
    if (s.functions.count(f) == 0 || f->module->ctx != tls_current) return CUDA_ERROR_INVALID_HANDLE;
    const std::uint64_t threads = std::uint64_t{block[0]} * block[1] * block[2];
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0 || threads == 0 || threads > kMaxThreadsPerBlock)
        return CUDA_ERROR_INVALID_VALUE;
    // A launch into a capture runs nothing until its graph does, and graphs keep no kernels here.
    if (s.streams.count(st) != 0 && st->capturing) return CUDA_SUCCESS;
    if (f->local_bytes <= tls_current->limits[CU_LIMIT_STACK_SIZE] && !tls_current->stack_given_back) return CUDA_SUCCESS;
    SimNode::Lock node(*s.node);
    s.reap_all();
    return s.stack_for_launch(tls_current, f->local_bytes);
}

}  // namespace cumemaudit::sim
