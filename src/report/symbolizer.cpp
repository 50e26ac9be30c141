#include "symbolizer.hpp"

#include "elf_build_id.hpp"
#include "libdw_api.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace cumemaudit::report {

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
        // Read from the loaded object itself, so offline symbolization works on hosts without libdw.
        if (!f.object.empty()) f.build_id = build_id_of_loaded(call);
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
        if (f.build_id.empty()) f.build_id = dw.build_id_hex(m);
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
