#include "shim/record/site_line.hpp"

#include "ledger/python_frames.hpp"

#include <fmt/format.h>

namespace cumemaudit::shim {

std::string describe_site(const ledger::Ledger& book, report::Symbolizer& symbolizer, const ledger::Site& site) {
    return describe_stack(book, symbolizer, site, 1);
}

std::string describe_stack(const ledger::Ledger& book, report::Symbolizer& symbolizer, const ledger::Site& site,
                           std::size_t max_frames) {
    const auto frames = book.traces().frames(site.trace);
    std::string out = site.api;
    std::size_t native = 0, python = 0;
    for (const ledger::Pc pc : frames) {
        // Python frames ride in the same trace as tagged pcs (ledger/python_frames.hpp): named from the
        // interpreter's own table, after the native ones, innermost first.
        if (ledger::is_python(pc)) {
            if (python == max_frames) continue;
            const ledger::PythonFrame f = book.python_frames().frame(pc);
            out += fmt::format("{}{} {}:{}", python++ == 0 ? "; Python: " : " < ", f.function, f.file, f.line);
            continue;
        }
        if (native == max_frames || python > 0) continue;
        const auto f = symbolizer.resolve(pc);
        const std::string where = f.file.empty() ? f.object : fmt::format("{}:{}", f.file, f.line);
        out += fmt::format("{}{} {}", native++ == 0 ? " in " : " < ", f.symbol.empty() ? "??" : f.symbol, where);
    }
    return out;
}

}  // namespace cumemaudit::shim
