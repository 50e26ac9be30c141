#include "offline_symbolizer.hpp"

#include "libdw_api.hpp"

#include "common/paths.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <map>

namespace cumemaudit::report {
namespace fs = std::filesystem;

struct OfflineSymbolizer::Impl {
    Libdw dw;
    bool ok = false;
    std::vector<std::string> search_dirs, debug_dirs;
    std::string debuginfo_path;  // ':'-separated, for libdw's own search of separate debug files
    char* debuginfo_path_ptr = nullptr;
    Dwfl_Callbacks callbacks{};

    // One offline session per local file, opened once.
    struct Opened {
        Dwfl* dwfl = nullptr;
        Dwfl_Module* module = nullptr;
        Dwarf_Addr start = 0;
        std::string build_id;
    };
    std::map<std::string, Opened> files;
    std::map<std::string, std::string> chosen;  // "<build id>|<object>" → the file used ("" when none)

    const Opened& open(const std::string& path) {
        auto [it, fresh] = files.try_emplace(path);
        if (!fresh) return it->second;
        Opened& o = it->second;
        o.dwfl = dw.begin(&callbacks);
        if (o.dwfl == nullptr) return o;
        dw.report_begin(o.dwfl);
        o.module = dw.report_offline(o.dwfl, path.c_str(), path.c_str(), -1);
        dw.report_end(o.dwfl, nullptr, nullptr);
        if (o.module == nullptr) return o;
        dw.module_info(o.module, nullptr, &o.start, nullptr, nullptr, nullptr, nullptr, nullptr);
        o.build_id = dw.build_id_hex(o.module);
        return o;
    }

    bool matches(const std::string& path, const std::string& build_id) {
        std::error_code ec;
        if (!fs::is_regular_file(path, ec)) return false;
        const Opened& o = open(path);
        return o.module != nullptr && (build_id.empty() || o.build_id == build_id);
    }

    std::string find(const Frame& f) {
        const std::string key = f.build_id + "|" + f.object;
        if (auto it = chosen.find(key); it != chosen.end()) return it->second;
        std::string found;
        if (!f.object.empty() && matches(f.object, f.build_id)) found = f.object;
        const std::string base(basename(f.object));
        for (std::size_t i = 0; found.empty() && !base.empty() && i < search_dirs.size(); ++i) {
            std::error_code ec;
            for (fs::recursive_directory_iterator it(search_dirs[i], fs::directory_options::skip_permission_denied, ec), end;
                 !ec && it != end; it.increment(ec))
                if (it->path().filename() == base && matches(it->path().string(), f.build_id)) {
                    found = it->path().string();
                    break;
                }
        }
        for (std::size_t i = 0; found.empty() && f.build_id.size() > 2 && i < debug_dirs.size(); ++i) {
            const std::string debug =
                debug_dirs[i] + "/.build-id/" + f.build_id.substr(0, 2) + "/" + f.build_id.substr(2) + ".debug";
            if (matches(debug, f.build_id)) found = debug;
        }
        return chosen[key] = found;
    }
};

OfflineSymbolizer::OfflineSymbolizer(std::vector<std::string> search_dirs, std::vector<std::string> debug_dirs)
    : impl_(std::make_unique<Impl>()) {
    Impl& s = *impl_;
    s.ok = s.dw.open();
    s.search_dirs = std::move(search_dirs);
    s.debug_dirs = std::move(debug_dirs);
    s.debug_dirs.push_back("/usr/lib/debug");
    for (const std::string& d : s.debug_dirs) s.debuginfo_path += (s.debuginfo_path.empty() ? "" : ":") + d;
    s.debuginfo_path_ptr = s.debuginfo_path.data();
    if (!s.ok) return;
    s.callbacks.find_elf = s.dw.build_id_find_elf;
    s.callbacks.find_debuginfo = s.dw.find_debuginfo;
    s.callbacks.section_address = s.dw.offline_section_address;
    s.callbacks.debuginfo_path = &s.debuginfo_path_ptr;
}

OfflineSymbolizer::~OfflineSymbolizer() {
    for (auto& [path, o] : impl_->files)
        if (o.dwfl) impl_->dw.end(o.dwfl);
}

bool OfflineSymbolizer::available() const { return impl_->ok; }

bool OfflineSymbolizer::resolve(Frame& f) {
    Impl& s = *impl_;
    if (!s.ok || f.offset == 0) return false;
    const std::string path = s.find(f);
    if (path.empty()) return false;
    const Impl::Opened& o = s.open(path);
    // offset is pc minus the load base, so the ELF address; pc is a return address: look inside the call.
    const Dwarf_Addr call = o.start + f.offset - 1;
    bool gained = false;
    if (f.symbol.empty() || f.symbol == "??") {
        const std::string sym = demangle(s.dw.addrname(o.module, call));
        if (!sym.empty()) {
            f.symbol = sym;
            gained = true;
        }
    }
    if (f.file.empty()) {
        if (Dwfl_Line* line = s.dw.getsrc(o.module, call)) {
            int lineno = 0;
            if (const char* file = s.dw.lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr)) {
                f.file = file;
                f.line = lineno > 0 ? static_cast<std::uint32_t>(lineno) : 0;
                gained = true;
            }
        }
    }
    return gained;
}

bool OfflineSymbolizer::has_file(const Frame& f) {
    Impl& s = *impl_;
    return s.ok && f.offset != 0 && !s.find(f).empty();
}

void for_each_site(Report& r, const std::function<void(Site&)>& visit) {
    for (Leak& l : r.leaks) visit(l.site);
    for (Misuse& m : r.misuse) visit(m.site);
    for (Alarm& a : r.alarms) visit(a.site);
    for (Reclaim& c : r.reclaimed) visit(c.site);
    for (Export& e : r.exports) visit(e.site);
    for (Import& i : r.imports) visit(i.site);
}

}  // namespace cumemaudit::report
