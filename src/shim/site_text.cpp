#include "site_text.hpp"

#include "auditor.hpp"

#include <fmt/format.h>

namespace cumemaudit::shim {

std::string describe_site(const ledger::Site& site) {
    Auditor& a = Auditor::get();
    const auto frames = a.ledger().traces().frames(site.trace);
    if (frames.empty()) return site.api;
    const report::Frame f = a.symbolizer().resolve(frames.front());
    const std::string where = f.file.empty() ? f.object : fmt::format("{}:{}", f.file, f.line);
    return fmt::format("{} in {} {}", site.api, f.symbol.empty() ? "??" : f.symbol, where);
}

}  // namespace cumemaudit::shim
