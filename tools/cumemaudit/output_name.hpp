// output_name: where `html` and `trace` write when -o is not given. In the current directory, never inside
// the reports' directory (it may be read-only, or a later `check DIR` would meet the file), named after
// what was drawn, so two views of two jobs do not overwrite each other.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cumemaudit::cli {

// "<name><suffix>": the one input's file name less ".json" (a directory's own name), or "cumemaudit" for
// several inputs. audit/ with ".html" gives "audit.html"; runs/cumemaudit.h.7.json with ".trace.json" gives
// "cumemaudit.h.7.trace.json".
std::string default_output(const std::vector<std::string>& inputs, std::string_view suffix);

}  // namespace cumemaudit::cli
