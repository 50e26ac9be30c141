#include "libdw_api.hpp"

#include <cxxabi.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace cumemaudit::report {
namespace {

template <class F>
bool sym(void* lib, F& f, const char* name) {
    f = reinterpret_cast<F>(::dlsym(lib, name));
    return f != nullptr;
}

}  // namespace

bool Libdw::open() {
    lib = ::dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return false;
    const bool ok =
        sym(lib, begin, "dwfl_begin") && sym(lib, end, "dwfl_end") && sym(lib, report_begin, "dwfl_report_begin") &&
        sym(lib, report_end, "dwfl_report_end") && sym(lib, report_offline, "dwfl_report_offline") &&
        sym(lib, proc_report, "dwfl_linux_proc_report") && sym(lib, proc_find_elf, "dwfl_linux_proc_find_elf") &&
        sym(lib, build_id_find_elf, "dwfl_build_id_find_elf") &&
        sym(lib, offline_section_address, "dwfl_offline_section_address") &&
        sym(lib, find_debuginfo, "dwfl_standard_find_debuginfo") && sym(lib, addrmodule, "dwfl_addrmodule") &&
        sym(lib, module_info, "dwfl_module_info") && sym(lib, addrname, "dwfl_module_addrname") &&
        sym(lib, getsrc, "dwfl_module_getsrc") && sym(lib, lineinfo, "dwfl_lineinfo") &&
        sym(lib, build_id, "dwfl_module_build_id");
    if (!ok) {
        ::dlclose(lib);
        lib = nullptr;
    }
    return ok;
}

std::string Libdw::build_id_hex(Dwfl_Module* m) const {
    const unsigned char* bits = nullptr;
    GElf_Addr vaddr = 0;
    return hex_of(bits, build_id(m, &bits, &vaddr));
}

std::string hex_of(const unsigned char* bytes, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) {
        char hex[3];
        std::snprintf(hex, sizeof hex, "%02x", bytes[i]);
        out += hex;
    }
    return out;
}

std::string demangle(const char* name) {
    if (name == nullptr || *name == '\0') return {};
    int status = 0;
    char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (status != 0 || out == nullptr) return name;
    std::string s(out);
    std::free(out);
    return s;
}

}  // namespace cumemaudit::report
