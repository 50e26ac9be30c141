// diff_cmd: `cumemaudit diff`, what grew between two reports (two runs, two checkpoints of one run) or
// between two steps of one report — per owner, per kind and per leak site, largest growth first, so the
// first line answers "who took the memory in between".
#pragma once

#include "report/report.hpp"
#include "report/site_key.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace cumemaudit::cli {

struct DiffRow {
    std::string name;
    std::uint64_t a = 0, b = 0;
    std::int64_t delta() const { return static_cast<std::int64_t>(b) - static_cast<std::int64_t>(a); }
};

struct DiffTable {
    std::string title;          // "live bytes by owner", …
    std::vector<DiffRow> rows;  // largest growth first, then by name
};

struct Diff {
    std::string a, b;  // what was compared, for the heading
    std::vector<DiffTable> tables;
};

// Owners (live), kinds (live), leak sites (one place by report::site_key) and the totals.
Diff diff_reports(const report::Report& a, const report::Report& b, std::string name_a, std::string name_b,
                  report::SiteKeyLines lines = report::SiteKeyLines::ignore);
// Owners, kinds and the step's figures (driver used, unattributed, PyTorch's own) from one step to another.
Diff diff_steps(const report::Step& a, const report::Step& b);

std::string diff_text(const Diff&);

// `files` is A B (each a report file, a merged job or a directory of rank reports, as every view takes
// them), or one report with `steps` = {N, M} (step numbers or mark labels). 0, or 2 on bad input.
// `match_lines`: sites differ by their lines too.
int diff_command(const std::vector<std::string>& files, const std::vector<std::string>& steps, bool match_lines);

}  // namespace cumemaudit::cli
