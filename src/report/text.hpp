// text: the human summary of a report, LSan-style — one block per leak site and per misuse with its top
// frames, ending in one grep-able SUMMARY line. Only rows that fail the report's gate are headed "Leak of";
// unfreed and mapped-at-exit rows are folded into one line unless show_held asks for them. The shim prints it to stderr at exit; `cumemaudit report`
// prints it for report files.
#pragma once

#include "report/human_bytes.hpp"
#include "report/report.hpp"

#include <string>

namespace cumemaudit::report {

struct TextDetail {
    int max_frames = 8;      // native frames shown per site
    bool show_held = false;  // unfreed and mapped-at-exit rows in full, not one folded line
    bool native = false;     // a Python site's interpreter and binding frames too
};

std::string text_summary(const Report&, const TextDetail& = {});

// The last line alone, exactly: "SUMMARY: cumemaudit: <leaked_bytes> bytes leaked in <leaked_allocations>
// allocations (<leaked_references> references); <misuse_events> misuse events; <unfreed_bytes> bytes
// unfreed at exit".
std::string summary_line(const Summary&);

}  // namespace cumemaudit::report
