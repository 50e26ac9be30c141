// libdw_api: the slice of elfutils' libdw that symbolization needs, resolved by name from libdw.so.1 at
// first use. Never linked: the preload library must load into processes on hosts without libdw (the H200
// image has none), and the CLI's offline symbolizer uses the same slice where it runs.
#pragma once

#include <elfutils/libdwfl.h>  // types only: every function is looked up in the dlopen'ed libdw

#include <string>

namespace cumemaudit::report {

struct Libdw {
    void* lib = nullptr;
    decltype(&::dwfl_begin) begin = nullptr;
    decltype(&::dwfl_end) end = nullptr;
    decltype(&::dwfl_report_begin) report_begin = nullptr;
    decltype(&::dwfl_report_end) report_end = nullptr;
    decltype(&::dwfl_report_offline) report_offline = nullptr;
    decltype(&::dwfl_linux_proc_report) proc_report = nullptr;
    decltype(&::dwfl_linux_proc_find_elf) proc_find_elf = nullptr;
    decltype(&::dwfl_build_id_find_elf) build_id_find_elf = nullptr;
    decltype(&::dwfl_offline_section_address) offline_section_address = nullptr;
    decltype(&::dwfl_standard_find_debuginfo) find_debuginfo = nullptr;
    decltype(&::dwfl_addrmodule) addrmodule = nullptr;
    decltype(&::dwfl_module_info) module_info = nullptr;
    decltype(&::dwfl_module_addrname) addrname = nullptr;
    decltype(&::dwfl_module_getsrc) getsrc = nullptr;
    decltype(&::dwfl_lineinfo) lineinfo = nullptr;
    decltype(&::dwfl_module_build_id) build_id = nullptr;

    bool open();  // false: no usable libdw.so.1 here
    std::string build_id_hex(Dwfl_Module*) const;  // "" when the module has none
};

std::string demangle(const char* name);  // the name itself when it is not a mangled C++ name; "" for null
std::string hex_of(const unsigned char* bytes, int n);

}  // namespace cumemaudit::report
