// Modules and launches: a module is PTX text read for its kernels (`.entry`), the local memory each of their
// threads declares (`.local`), the length of their code, and its module-scope globals (`.global`); nothing is
// compiled and nothing executes. A module holds device memory for its globals from its making and for each
// kernel's code from its loading (the first get of it under lazy loading, the module's making under eager),
// in its context's two heaps (docs/DRIVER.md, "Module code and globals"). What a launch does to memory is the
// kernel stack: a kernel needing more local memory per thread than the context's stack limit raises the limit
// to it and reserves the difference for every thread the device holds, or is refused with
// CUDA_ERROR_OUT_OF_MEMORY after giving the whole stack back (docs/DRIVER.md, "Contexts, kernel stacks and
// launches"). A kernel that calls malloc reserves the context's device heap at its first launch, one that
// calls vprintf fixes the printf FIFO's limit (docs/DRIVER.md, "Device heap, printf FIFO and green contexts").
#include "state.hpp"
#include "state_impl.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <optional>
#include <string_view>
#include <thread>

namespace cumemaudit::sim {

namespace {

constexpr int kMaxThreadsPerBlock = 1024;  // an H200's (CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)

// What the driver's code for one PTX statement takes, and the page a function's code or a module's globals
// are rounded up to (docs/DRIVER.md, "Module code and globals").
constexpr std::uint64_t kCodePerStatement = 16;
constexpr std::uint64_t kModulePage = 4096;

struct Kernel {
    std::string name;
    std::uint64_t local_bytes = 0;
    std::uint64_t code_bytes = 0;
    bool uses_heap = false, prints = false;
};

struct Image {
    std::vector<Kernel> kernels;
    std::uint64_t global_bytes = 0;  // its module-scope .global variables, rounded up to a page
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

// Whether a kernel's body names `function` as a whole identifier (a call's target: `call.uni (retval0),
// malloc, (param0);`), not as part of another name.
bool names(std::string_view body, std::string_view function) {
    for (std::size_t at = body.find(function); at != std::string_view::npos; at = body.find(function, at + 1)) {
        const std::size_t end = at + function.size();
        if ((at == 0 || !ident(body[at - 1])) && (end == body.size() || !ident(body[end]))) return true;
    }
    return false;
}

// The instructions of a kernel's body: its `;`-terminated statements but for directives (`.reg`, `.local`,
// `.pragma`), a label before one counting for nothing.
std::uint64_t statements(std::string_view body) {
    std::uint64_t n = 0;
    for (std::size_t start = 0, end = 0; (end = body.find(';', start)) != std::string_view::npos; start = end + 1) {
        std::size_t i = start;
        while (i < end && (space(body[i]) || body[i] == '{' || body[i] == '}')) ++i;
        std::size_t label = i;
        while (label < end && ident(body[label])) ++label;
        if (label > i && label < end && body[label] == ':') i = skip_space(body, label + 1);
        if (i < end && body[i] != '.') ++n;
    }
    return n;
}

// A declaration with its initialisers (`= 5`, `= {1, 2}`) taken out, so that only names and extents remain.
std::string without_initialisers(std::string_view decl) {
    std::string out;
    int depth = 0;
    bool initialiser = false;
    for (char c : decl) {
        if (c == '=') initialiser = true;
        if (!initialiser) {
            out += c;
            continue;
        }
        depth += c == '{' ? 1 : c == '}' ? -1 : 0;
        if (depth == 0 && c == ',') {
            initialiser = false;
            out += c;
        }
    }
    return out;
}

// The bytes of a module-scope statement that defines `.global` variables: `.global` on its line after nothing
// but `.visible`, `.weak` or `.common` (directives like `.target` end at their line, not at a `;`). An
// `.extern` one declares another module's and takes nothing here.
std::uint64_t defined_global_bytes(std::string_view statement) {
    std::size_t at = statement.find(".global");
    while (at != std::string_view::npos && !token_at(statement, at, ".global")) at = statement.find(".global", at + 1);
    if (at == std::string_view::npos) return 0;
    const std::size_t line = statement.rfind('\n', at);
    for (std::size_t i = skip_space(statement, line == std::string_view::npos ? 0 : line + 1); i < at;) {
        std::size_t end = i;
        while (end < at && !space(statement[end])) ++end;
        const std::string_view word = statement.substr(i, end - i);
        if (word != ".visible" && word != ".weak" && word != ".common") return 0;
        i = skip_space(statement, end);
    }
    return declared_bytes(without_initialisers(statement.substr(at + 7)));
}

// The module-scope `.global` variables of a PTX text (its comments blanked): every statement outside the
// kernels' and functions' bodies.
std::uint64_t global_bytes(std::string_view s) {
    std::uint64_t total = 0;
    std::size_t start = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '{') {
            const bool initialiser = s.substr(start, i - start).find('=') != std::string_view::npos;
            const std::size_t close = past_closing(s, i, '{', '}');
            if (close == std::string_view::npos) break;
            if (!initialiser) start = close;  // a body: what came before it was its header
            i = close - 1;
        } else if (s[i] == ';') {
            total += defined_global_bytes(s.substr(start, i - start));
            start = i + 1;
        }
    }
    return total;
}

enum class Read { ok, not_ptx, malformed };

// The kernels and globals of a PTX image: text whose first directive is `.version`. A cubin or fatbin is not
// read here.
Read read_ptx(std::string_view image, Image& out) {
    std::vector<Kernel>& kernels = out.kernels;
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
        const std::string_view body = s.substr(open + 1, close - open - 2);
        k.local_bytes = local_bytes(body);
        k.code_bytes = round_up(statements(body) * kCodePerStatement, kModulePage);
        k.uses_heap = names(body, "malloc") || names(body, "free");
        k.prints = names(body, "vprintf");
        kernels.push_back(std::move(k));
        at = close - 1;
    }
    out.global_bytes = round_up(global_bytes(s), kModulePage);
    return Read::ok;
}

}  // namespace

namespace {

CUresult read_image(const char* image, Image& out) {
    switch (read_ptx(image, out)) {
        case Read::not_ptx: return CUDA_ERROR_INVALID_IMAGE;
        case Read::malformed: return CUDA_ERROR_INVALID_PTX;
        case Read::ok: break;
    }
    return CUDA_SUCCESS;
}

// A module of these kernels for `ctx`, to be made there (Impl::make_module).
std::unique_ptr<CUmod_st> module_of(const Image& image, CUcontext ctx, CUlibrary library) {
    auto m = std::make_unique<CUmod_st>(CUmod_st{ctx, {}, library});
    for (const Kernel& k : image.kernels) {
        auto f = std::make_unique<CUfunc_st>(CUfunc_st{m.get(), k.name, k.local_bytes, k.code_bytes});
        f->uses_heap = k.uses_heap;
        f->prints = k.prints;
        m->functions.push_back(std::move(f));
    }
    return m;
}

}  // namespace

CUresult SimState::Impl::take_range(CUcontext ctx, ModuleHeap& heap, std::uint64_t bytes, HeapRange* out) {
    *out = {};
    if (bytes == 0) return CUDA_SUCCESS;
    if (bytes > config.memory_per_device) return CUDA_ERROR_OUT_OF_MEMORY;
    const std::uint64_t first = heap.next / kModuleChunk, last = (heap.next + bytes - 1) / kModuleChunk;
    std::uint64_t fresh = 0;
    for (std::uint64_t c = first; c <= last; ++c) fresh += heap.live.count(c) == 0 ? kModuleChunk : 0;
    if (fresh != 0 && (!room_for(ctx->device, fresh) || !node->charge_classic(ctx->device, fresh)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (std::uint64_t c = first; c <= last; ++c) ++heap.live[c];
    *out = {heap.next, bytes};
    heap.next += bytes;  // never reused: a range given back leaves a hole
    return CUDA_SUCCESS;
}

void SimState::Impl::give_range(CUcontext ctx, ModuleHeap& heap, HeapRange r) {
    if (r.bytes == 0) return;
    for (std::uint64_t c = r.offset / kModuleChunk; c <= (r.offset + r.bytes - 1) / kModuleChunk; ++c) {
        auto it = heap.live.find(c);
        if (it == heap.live.end() || --it->second != 0) continue;
        heap.live.erase(it);
        node->uncharge_classic(ctx->device, kModuleChunk);
    }
}

CUresult SimState::Impl::load_code(CUfunction f) {
    if (f->loaded) return CUDA_SUCCESS;
    CUcontext ctx = home(f->module->ctx);
    if (CUresult r = take_range(ctx, ctx->code, f->code_bytes, &f->code); r != CUDA_SUCCESS) return r;
    f->loaded = true;
    return CUDA_SUCCESS;
}

CUresult SimState::Impl::make_module(std::unique_ptr<CUmod_st> m, std::uint64_t global_bytes, CUmodule* out) {
    CUcontext ctx = home(m->ctx);
    // What malloc brings with it, at the making of the first module in a context with a kernel that calls it
    // (measured at the load, lazy loading or eager), held with the context.
    const bool heap_user = std::any_of(m->functions.begin(), m->functions.end(), [](const auto& f) { return f->uses_heap; });
    const std::uint64_t heap_code = heap_user && !ctx->heap_code_taken ? config.heap_code_bytes : 0;
    if (heap_code != 0 && (!room_for(ctx->device, heap_code) || !node->charge_classic(ctx->device, heap_code)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    ctx->reserved += heap_code;
    ctx->heap_code_taken = ctx->heap_code_taken || heap_user;
    if (CUresult r = take_range(ctx, ctx->data, global_bytes, &m->globals); r != CUDA_SUCCESS) return r;
    for (const auto& f : m->functions) {
        const CUresult r = eager_loading ? load_code(f.get()) : CUDA_SUCCESS;
        if (r == CUDA_SUCCESS) continue;
        release_module(*m);
        return r;
    }
    for (const auto& f : m->functions) functions.insert(f.get());
    if (m->library != nullptr) libraries.at(m->library)->modules[ctx] = m.get();
    *out = m.get();
    modules.emplace(m.get(), std::move(m));
    return CUDA_SUCCESS;
}

void SimState::Impl::release_module(CUmod_st& m) {
    CUcontext ctx = home(m.ctx);
    give_range(ctx, ctx->data, m.globals);
    for (const auto& f : m.functions) {
        if (f->loaded) give_range(ctx, ctx->code, f->code);
        functions.erase(f.get());
    }
    if (m.library == nullptr) return;
    auto& made = libraries.at(m.library)->modules;
    if (auto it = made.find(m.ctx); it != made.end() && it->second == &m) made.erase(it);
}

CUresult SimState::Impl::library_module(CUlibrary lib, CUcontext ctx, CUmodule* out) {
    CUlib_st& l = *libraries.at(lib);
    if (auto m = l.modules.find(ctx); m != l.modules.end()) {
        *out = m->second;
        return CUDA_SUCCESS;
    }
    Image image;
    read_image(l.image.c_str(), image);  // read at the load
    return make_module(module_of(image, ctx, lib), image.global_bytes, out);
}

CUresult SimState::Impl::kernel_function(CUkernel k, CUcontext ctx, CUfunction* out) {
    CUmodule m = nullptr;
    if (CUresult r = library_module(k->library, ctx, &m); r != CUDA_SUCCESS) return r;
    for (const auto& f : m->functions) {
        if (f->name != k->name) continue;
        if (CUresult r = load_code(f.get()); r != CUDA_SUCCESS) return r;
        *out = f.get();
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_NOT_FOUND;  // not reached: a library's kernels are its image's
}

CUresult SimState::Impl::eager_library_modules(CUcontext ctx) {
    if (!eager_loading) return CUDA_SUCCESS;
    std::vector<CUlibrary> in_order;
    for (const auto& [lib, l] : libraries)
        if (l->modules.count(ctx) == 0) in_order.push_back(lib);
    std::sort(in_order.begin(), in_order.end(), [&](CUlibrary a, CUlibrary b) { return a->serial < b->serial; });
    for (std::size_t i = 0; i < in_order.size(); ++i) {
        CUmodule m = nullptr;
        if (CUresult r = library_module(in_order[i], ctx, &m); r == CUDA_SUCCESS) continue;
        for (std::size_t j = 0; j < i; ++j) {  // none of them, as the context itself is refused
            CUmodule made = libraries.at(in_order[j])->modules.at(ctx);
            release_module(*made);
            modules.erase(made);
        }
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

void SimState::compile_wait() {
    int ms = 0;
    {
        std::lock_guard lock(impl_->mu);
        ms = impl_->config.jit_ms;
    }
    if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

CUresult SimState::module_load(CUmodule* out, const char* image) {
    Image read;
    // Read before the lock: reading a large image blocks no other call.
    if (CUresult r = read_image(image, read); r != CUDA_SUCCESS) return r;
    compile_wait();
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    int dev = 0;
    if (CUresult r = s.current_device(&dev); r != CUDA_SUCCESS) return r;
    SimNode::Lock node(*s.node);
    s.reap_all();
    return s.make_module(module_of(read, tls_current, nullptr), read.global_bytes, out);
}

CUresult SimState::library_load(CUlibrary* out, const char* image) {
    Image read;
    if (CUresult r = read_image(image, read); r != CUDA_SUCCESS) return r;
    compile_wait();
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto made = std::make_unique<CUlib_st>(CUlib_st{image, {}, {}, ++s.libraries_loaded});
    CUlibrary lib = made.get();
    for (const Kernel& k : read.kernels) made->kernels.push_back(std::make_unique<CUkern_st>(CUkern_st{lib, k.name}));
    s.libraries.emplace(lib, std::move(made));
    if (s.eager_loading && tls_current != nullptr) {  // loaded into the current context at once
        SimNode::Lock node(*s.node);
        s.reap_all();
        CUmodule m = nullptr;
        if (CUresult r = s.library_module(lib, tls_current, &m); r != CUDA_SUCCESS) {
            s.libraries.erase(lib);
            return r;
        }
    }
    for (const auto& k : lib->kernels) s.kernels.insert(k.get());
    *out = lib;
    return CUDA_SUCCESS;
}

CUresult SimState::library_module(CUmodule* out, CUlibrary lib) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (s.libraries.count(lib) == 0) return CUDA_ERROR_INVALID_HANDLE;
    int dev = 0;
    if (CUresult r = s.current_device(&dev); r != CUDA_SUCCESS) return r;
    SimNode::Lock node(*s.node);
    s.reap_all();
    return s.library_module(lib, tls_current, out);
}

CUresult SimState::library_unload(CUlibrary lib) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = s.libraries.find(lib);
    if (it == s.libraries.end()) return CUDA_ERROR_INVALID_HANDLE;
    SimNode::Lock node(*s.node);
    for (const auto& [ctx, m] : std::map<CUcontext, CUmodule>(it->second->modules)) {
        s.release_module(*m);
        s.modules.erase(m);
    }
    for (const auto& k : it->second->kernels) s.kernels.erase(k.get());
    s.libraries.erase(it);
    return CUDA_SUCCESS;
}

CUresult SimState::library_kernel(CUkernel* out, CUlibrary lib, const char* name) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = s.libraries.find(lib);
    if (it == s.libraries.end()) return CUDA_ERROR_INVALID_HANDLE;
    for (const auto& k : it->second->kernels) {
        if (k->name != name) continue;
        *out = k.get();
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_NOT_FOUND;
}

CUresult SimState::kernel_function(CUfunction* out, CUkernel k) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (s.kernels.count(k) == 0) return CUDA_ERROR_INVALID_HANDLE;
    int dev = 0;
    if (CUresult r = s.current_device(&dev); r != CUDA_SUCCESS) return r;
    SimNode::Lock node(*s.node);
    s.reap_all();
    return s.kernel_function(k, tls_current, out);
}

CUresult SimState::kernel_library(CUlibrary* out, CUkernel k) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (s.kernels.count(k) == 0) return CUDA_ERROR_INVALID_HANDLE;
    *out = k->library;
    return CUDA_SUCCESS;
}

CUresult SimState::loading_mode(CUmoduleLoadingMode* out) const {
    std::lock_guard lock(impl_->mu);
    if (!impl_->initialized) return CUDA_ERROR_NOT_INITIALIZED;
    *out = impl_->eager_loading ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING;
    return CUDA_SUCCESS;
}

CUresult SimState::module_unload(CUmodule m) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = s.modules.find(m);
    if (it == s.modules.end()) return CUDA_ERROR_INVALID_HANDLE;
    SimNode::Lock node(*s.node);
    s.release_module(*it->second);
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
        SimNode::Lock node(*s.node);
        s.reap_all();
        if (CUresult r = s.load_code(f.get()); r != CUDA_SUCCESS) return r;
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
    const auto kernel = reinterpret_cast<CUkernel>(f);
    // A function of another context's module, or of one unloaded, is not a handle this context knows.
    if (s.kernels.count(kernel) == 0 && (s.functions.count(f) == 0 || f->module->ctx != tls_current))
        return CUDA_ERROR_INVALID_HANDLE;
    const std::uint64_t threads = std::uint64_t{block[0]} * block[1] * block[2];
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0 || threads == 0 || threads > kMaxThreadsPerBlock)
        return CUDA_ERROR_INVALID_VALUE;
    // A library's kernel runs as its function in this context; a function's code is loaded by its first run
    // at the latest.
    if (s.kernels.count(kernel) != 0 || !f->loaded) {
        SimNode::Lock node(*s.node);
        s.reap_all();
        const CUresult r = s.kernels.count(kernel) != 0 ? s.kernel_function(kernel, tls_current, &f) : s.load_code(f);
        if (r != CUDA_SUCCESS) return r;
    }
    // A launch into a capture runs nothing until its graph does, and graphs keep no kernels here.
    if (s.streams.count(st) != 0 && st->capturing) return CUDA_SUCCESS;
    CUcontext ctx = Impl::home(tls_current);
    const bool stack_fits = f->local_bytes <= ctx->limits[CU_LIMIT_STACK_SIZE] && !ctx->stack_given_back;
    if (stack_fits && (!f->uses_heap || ctx->heap_fixed)) {
        ctx->fifo_fixed = ctx->fifo_fixed || f->prints;
        return CUDA_SUCCESS;
    }
    SimNode::Lock node(*s.node);
    s.reap_all();
    if (!stack_fits)
        if (CUresult r = s.stack_for_launch(ctx, f->local_bytes); r != CUDA_SUCCESS) return r;
    if (f->uses_heap)
        if (CUresult r = s.heap_for_launch(ctx); r != CUDA_SUCCESS) return r;
    ctx->fifo_fixed = ctx->fifo_fixed || f->prints;
    return CUDA_SUCCESS;
}

}  // namespace cumemaudit::sim
