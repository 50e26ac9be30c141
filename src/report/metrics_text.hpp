// metrics_text: a report as OpenMetrics text, the Prometheus exposition format a node_exporter textfile
// collector reads (docs/LIVE.md): live, peak and leaked bytes per owner, live bytes per owner and device,
// leaked allocations, marks made, and when the report was written; the process's rank as a label. A pure
// function of the report: the shim writes its result beside the report (option `metrics`).
#pragma once

#include "report.hpp"

#include <string>
#include <string_view>

namespace cumemaudit::report {

std::string openmetrics_text(const Report&);

// A label value as the format quotes it: `\`, `"` and newline escaped (`\\`, `\"`, `\n`), and bytes that
// are not UTF-8 replaced with U+FFFD (the format's text is UTF-8).
std::string metrics_label_value(std::string_view);

}  // namespace cumemaudit::report
