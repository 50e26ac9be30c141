// html_job: the HTML page of a job (a merged job report, or a directory of rank reports merged in memory):
// which ranks leak, how much, since which step and at which line first, then the ranks' leaked bytes over
// the steps, the leak sites across ranks, cross-rank pinning and every rank. One self-contained page, as
// the page of process reports is (html_page.hpp).
#pragma once

#include "report/job.hpp"

#include <string>

namespace cumemaudit::cli {

std::string html_job_page(const report::JobReport&);

}  // namespace cumemaudit::cli
