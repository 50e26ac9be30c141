#include "html_cmd.hpp"

#include "html_chart.hpp"
#include "html_escape.hpp"
#include "html_flame.hpp"
#include "html_forecast.hpp"
#include "html_job.hpp"
#include "html_page.hpp"
#include "html_tables.hpp"
#include "load_all.hpp"
#include "output_name.hpp"
#include "terminal_out.hpp"
#include "report/forecast_text.hpp"
#include "report/text.hpp"
#include "report/timeline.hpp"

#include <fmt/format.h>

namespace cumemaudit::cli {
namespace {

std::string title(const report::Report& r) {
    std::string t = r.process.rank >= 0 ? fmt::format("rank {} · ", r.process.rank) : "";
    return t + fmt::format("pid {} on {}", r.process.pid, r.process.host);
}

std::string section(const report::Report& r, const std::string& file, std::size_t index) {
    const report::Timeline t = report::timeline(r);
    std::string argv;
    for (const std::string& a : r.process.argv) argv += (argv.empty() ? "" : " ") + a;
    std::string s = fmt::format("<section class=\"report\" id=\"report-{}\">\n<h2>{}</h2>\n", index, html_escape(title(r)));
    s += fmt::format("<p class=\"meta\"><code>{}</code> · {} · driver {}{} · {}</p>\n", html_escape(argv),
                     html_escape(file), r.driver.version, r.driver.simulated ? " (simulated)" : "",
                     r.checkpoint ? "checkpoint, written while running"
                     : r.process.exit_code ? fmt::format("exit code {}", *r.process.exit_code) : "exit");
    const report::Summary& m = r.summary;
    s += "<div class=\"cards\">" + html_card("leaked", report::human_bytes(m.leaked_bytes), m.leaked_bytes != 0) +
         html_card("leaked allocations", std::to_string(m.leaked_allocations), m.leaked_allocations != 0) +
         html_card("unfreed at exit", report::human_bytes(m.unfreed_bytes)) +
         html_card("peak tracked", report::human_bytes(m.peak_tracked_bytes)) +
         html_card("misuse events", std::to_string(m.misuse_events), m.misuse_events != 0) +
         html_card("steps", std::to_string(r.steps.size())) +
         (r.oom.empty() ? "" : html_card("out of memory", std::to_string(r.summary.oom_events), true)) + html_card("alarms", std::to_string(r.alarms.size()), !r.alarms.empty()) +
         "</div>\n";
    s += "<h3>Memory per owner over steps</h3>\n";
    s += t.points.empty() ? "<p class=\"none\">No steps recorded: mark them with cumemaudit_step() or the Python "
                            "helper's cumemaudit.step(n).</p>\n"
                          : memory_chart_svg(r, t);
    for (const report::Forecast& f : r.forecasts)
        if (f.oom_step) s += "<h3>Forecast</h3>\n<p class=\"forecast\">" + html_escape(report::forecast_line(f)) + ".</p>\n" + forecast_chart_svg(r, f);
    if (!r.oom.empty()) s += "<h3>Out of memory</h3>\n" + oom_table(r);
    s += "<h3>Leaks</h3>\n" + leaks_table(r);
    s += "<h3>Held at exit (not leaks)</h3>\n" + held_table(r);
    s += "<h3>By stack</h3>\n" + flame_graphs(r, index);
    s += "<h3>Growth alarms</h3>\n" + alarms_table(r);
    s += "<h3>CUDA graphs</h3>\n" + graphs_table(r);
    if (!r.capture_profile.empty())
        s += fmt::format("<h3>Capture profile</h3>\n<p>The lines whose blocks a capture window left free ({} allocator "
                         "events of PyTorch's history), the most free first.</p>\n", r.capture_trace_entries) +
             capture_table(r);
    s += "<h3>Owners</h3>\n" + owners_table(r);
    s += "<h3>Misuse</h3>\n" + misuse_table(r);
    s += "<h3>Steps</h3>\n<details><summary>" + std::to_string(t.points.size()) + " steps and marks</summary>\n" +
         steps_table(t) + "</details>\n";
    return s + "</section>\n";
}

// The page for several reports, one section per report (a rank), in the order given; `names` are the
// files they came from, shown in each section's heading.
std::string reports_page(const std::vector<report::Report>& reports, const std::vector<std::string>& names) {
    std::string s;
    s += fmt::format("<p class=\"meta\">{} report{}; bytes in KiB/MiB/GiB (1 GiB = 2<sup>30</sup> bytes), exact "
                     "figures on hover.</p>\n", reports.size(), reports.size() == 1 ? "" : "s");
    if (reports.size() > 1) {
        s += "<nav>";
        for (std::size_t i = 0; i < reports.size(); ++i)
            s += fmt::format("<a href=\"#report-{}\">{}</a>", i, html_escape(title(reports[i])));
        s += "</nav>\n";
    }
    for (std::size_t i = 0; i < reports.size(); ++i) s += section(reports[i], names[i], i);
    return html_document("cumemaudit report", s);
}

}  // namespace

int html_command(const std::vector<std::string>& files, const std::string& out) {
    ViewInput in;
    if (!load_view_input(files, in)) return 2;
    const std::string path = out.empty() ? default_output(files, ".html") : out;
    if (!write_text(path, in.job ? html_job_page(*in.job) : reports_page(in.reports, in.names))) return 2;
    if (out.empty()) say(stdout, "cumemaudit html: wrote {}\n", path);  // a name it chose: say which
    return 0;
}

}  // namespace cumemaudit::cli
