// html_page: what every page of `cumemaudit html` shares, the page of process reports (html_cmd) and the
// page of a job (html_job): the frame with its inline style and script, so a page fetches nothing, and the
// pieces both draw.
#pragma once

#include <string>

namespace cumemaudit::cli {

// The page around `body`: the inline style and script every page has, `title` as its heading.
std::string html_document(const std::string& title, const std::string& body);

// A figure in the row of cards at the top of a page; `bad` draws it in red.
std::string html_card(const char* label, const std::string& value, bool bad = false);

}  // namespace cumemaudit::cli
