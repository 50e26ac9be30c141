#include "shim/record/site_line.hpp"

#include "ledger/python_frames.hpp"

#include <fmt/format.h>

namespace cumemaudit::shim {

std::string describe_site(const ledger::Ledger& book, report::Symbolizer& symbolizer, const ledger::Site& site,
                          const user_frame::Skip& skip) {
    return describe_stack(book, symbolizer, site, 1, skip);
}

std::string describe_stack(const ledger::Ledger& book, report::Symbolizer& symbolizer, const ledger::Site& site,
                           std::size_t max_frames, const user_frame::Skip& skip) {
    const auto frames = book.traces().frames(site.trace);
    // Python frames ride in the same trace as tagged pcs (ledger/python_frames.hpp), after the native ones:
    // where there are any, the line names the place a person fixes, then the frames out from it.
    std::vector<ledger::PythonFrame> python;
    for (const ledger::Pc pc : frames)
        if (ledger::is_python(pc)) python.push_back(book.python_frames().frame(pc));
    if (!python.empty()) {
        std::vector<user_frame::Frame> views;
        std::vector<std::string_view> files;
        for (const ledger::PythonFrame& f : python) {
            views.push_back({f.file, f.line, f.function});
            files.push_back(f.file);
        }
        const std::size_t named = user_frame::pick(files, skip);
        std::string out = fmt::format("{} at {}", site.api, user_frame::named_place(views, named));
        for (std::size_t i = named + 1; i < views.size() && i < named + max_frames; ++i) out += " < " + user_frame::place(views[i]);
        return out;
    }
    std::string out = site.api;
    std::size_t native = 0;
    for (const ledger::Pc pc : frames) {
        if (native == max_frames) break;
        const auto f = symbolizer.resolve(pc);
        const std::string where = f.file.empty() ? f.object : fmt::format("{}:{}", f.file, f.line);
        out += fmt::format("{}{} {}", native++ == 0 ? " in " : " < ", f.symbol.empty() ? "??" : f.symbol, where);
    }
    return out;
}

}  // namespace cumemaudit::shim
