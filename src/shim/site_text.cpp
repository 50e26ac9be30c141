#include "site_text.hpp"

#include "auditor.hpp"

#include <fmt/format.h>

namespace cumemaudit::shim {

std::string describe_site(const ledger::Site& site) { return describe_stack(site, 1); }

std::string describe_stack(const ledger::Site& site, std::size_t max_frames) {
    Auditor& a = Auditor::get();
    const auto frames = a.ledger().traces().frames(site.trace);
    std::string out = site.api;
    for (std::size_t i = 0; i < frames.size() && i < max_frames; ++i) {
        const report::Frame f = a.symbolizer().resolve(frames[i]);
        const std::string where = f.file.empty() ? f.object : fmt::format("{}:{}", f.file, f.line);
        out += fmt::format("{}{} {}", i == 0 ? " in " : " < ", f.symbol.empty() ? "??" : f.symbol, where);
    }
    return out;
}

}  // namespace cumemaudit::shim
