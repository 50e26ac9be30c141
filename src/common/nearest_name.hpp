// nearest_name: the "did you mean" of a misspelt name — a command, a flag, an option key — among the names
// that exist, as git and pip suggest them. Written once for the CLI and the options table.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace cumemaudit {

// The known name closest to `wrong` (edits: insert, delete, replace, swap two neighbours; '-' and '_' read
// alike), when it is close enough to be a slip of the keyboard: at most a third of its length, at least one.
std::optional<std::string> nearest_name(std::string_view wrong, std::span<const std::string_view> known);

// " (did you mean X?)" or "".
std::string did_you_mean(std::string_view wrong, std::span<const std::string_view> known);

}  // namespace cumemaudit
