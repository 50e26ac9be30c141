#include "symbolizer.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <elfutils/libdwfl.h>  // types only: every function is looked up in the dlopen'ed libdw
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace cumemaudit::report {
namespace {

std::string demangle(const char* name) {
    if (name == nullptr || *name == '\0') return {};
    int status = 0;
    char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (status != 0 || out == nullptr) return name;
    std::string s(out);
    std::free(out);
    return s;
}

// The slice of libdw the symbolizer needs, resolved by name from libdw.so.1.
struct Libdw {
    void* lib = nullptr;
    decltype(&::dwfl_begin) begin = nullptr;
    decltype(&::dwfl_end) end = nullptr;
    decltype(&::dwfl_report_begin) report_begin = nullptr;
    decltype(&::dwfl_report_end) report_end = nullptr;
    decltype(&::dwfl_linux_proc_report) proc_report = nullptr;
    decltype(&::dwfl_linux_proc_find_elf) proc_find_elf = nullptr;
    decltype(&::dwfl_standard_find_debuginfo) find_debuginfo = nullptr;
    decltype(&::dwfl_addrmodule) addrmodule = nullptr;
    decltype(&::dwfl_module_addrname) addrname = nullptr;
    decltype(&::dwfl_module_getsrc) getsrc = nullptr;
    decltype(&::dwfl_lineinfo) lineinfo = nullptr;
    decltype(&::dwfl_module_build_id) build_id = nullptr;

    bool open() {
        lib = ::dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) return false;
        const bool ok = sym(begin, "dwfl_begin") && sym(end, "dwfl_end") && sym(report_begin, "dwfl_report_begin") &&
                        sym(report_end, "dwfl_report_end") && sym(proc_report, "dwfl_linux_proc_report") &&
                        sym(proc_find_elf, "dwfl_linux_proc_find_elf") &&
                        sym(find_debuginfo, "dwfl_standard_find_debuginfo") && sym(addrmodule, "dwfl_addrmodule") &&
                        sym(addrname, "dwfl_module_addrname") && sym(getsrc, "dwfl_module_getsrc") &&
                        sym(lineinfo, "dwfl_lineinfo") && sym(build_id, "dwfl_module_build_id");
        if (!ok) {
            ::dlclose(lib);
            lib = nullptr;
        }
        return ok;
    }
    template <class F> bool sym(F& f, const char* name) {
        f = reinterpret_cast<F>(::dlsym(lib, name));
        return f != nullptr;
    }
};

}  // namespace

struct Symbolizer::Impl {
    std::mutex mu;
    std::unordered_map<std::uint64_t, Frame> cache;
    bool tried = false;
    Libdw dw;
    Dwfl_Callbacks callbacks{};
    Dwfl* dwfl = nullptr;

    ~Impl() {
        if (dwfl) dw.end(dwfl);
        // libdw stays loaded: unloading it at exit races other atexit work for nothing.
    }

    void start() {
        tried = true;
        if (!dw.open()) return;
        callbacks.find_elf = dw.proc_find_elf;
        callbacks.find_debuginfo = dw.find_debuginfo;
        dwfl = dw.begin(&callbacks);
        if (dwfl && !report_modules()) {
            dw.end(dwfl);
            dwfl = nullptr;
        }
    }
    // Libraries dlopen'ed after the last report are missing: called again when an address has no module.
    bool report_modules() {
        dw.report_begin(dwfl);
        const int rc = dw.proc_report(dwfl, ::getpid());
        return dw.report_end(dwfl, nullptr, nullptr) == 0 && rc == 0;
    }
    Dwfl_Module* module_of(Dwarf_Addr addr) {
        Dwfl_Module* m = dw.addrmodule(dwfl, addr);
        if (!m && report_modules()) m = dw.addrmodule(dwfl, addr);
        return m;
    }

    Frame resolve(std::uint64_t pc) {
        Frame f;
        f.pc = pc;
        const std::uint64_t call = pc ? pc - 1 : 0;
        Dl_info info{};
        if (::dladdr(reinterpret_cast<void*>(call), &info) != 0) {
            if (info.dli_fname) f.object = info.dli_fname;
            f.offset = pc - reinterpret_cast<std::uint64_t>(info.dli_fbase);
            f.symbol = demangle(info.dli_sname);
        }
        if (!tried) start();
        if (!dwfl) return f;
        Dwfl_Module* m = module_of(call);
        if (!m) return f;
        if (f.symbol.empty()) f.symbol = demangle(dw.addrname(m, call));  // local symbols dladdr cannot see
        if (Dwfl_Line* line = dw.getsrc(m, call)) {
            int lineno = 0;
            if (const char* file = dw.lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr)) {
                f.file = file;
                f.line = lineno > 0 ? static_cast<std::uint32_t>(lineno) : 0;
            }
        }
        const unsigned char* bits = nullptr;
        GElf_Addr vaddr = 0;
        const int n = dw.build_id(m, &bits, &vaddr);
        for (int i = 0; i < n; ++i) {
            char hex[3];
            std::snprintf(hex, sizeof hex, "%02x", bits[i]);
            f.build_id += hex;
        }
        return f;
    }
};

Symbolizer::Symbolizer() : impl_(std::make_unique<Impl>()) {}
Symbolizer::~Symbolizer() = default;

Frame Symbolizer::resolve(std::uint64_t pc) {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->cache.find(pc);
    if (it != impl_->cache.end()) return it->second;
    return impl_->cache.emplace(pc, impl_->resolve(pc)).first->second;
}

bool Symbolizer::has_dwarf() {
    std::lock_guard lock(impl_->mu);
    if (!impl_->tried) impl_->start();
    return impl_->dwfl != nullptr;
}

}  // namespace cumemaudit::report
