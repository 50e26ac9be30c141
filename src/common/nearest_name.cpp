#include "common/nearest_name.hpp"

#include <algorithm>
#include <vector>

namespace cumemaudit {
namespace {

char folded(char c) { return c == '-' ? '_' : c; }

// Optimal string alignment distance (Damerau-Levenshtein without repeated edits of one substring).
std::size_t distance(std::string_view a, std::string_view b) {
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i)
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t cost = folded(a[i - 1]) == folded(b[j - 1]) ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && folded(a[i - 1]) == folded(b[j - 2]) && folded(a[i - 2]) == folded(b[j - 1]))
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[a.size()][b.size()];
}

}  // namespace

std::optional<std::string> nearest_name(std::string_view wrong, std::span<const std::string_view> known) {
    if (wrong.empty() || wrong.size() > 64) return std::nullopt;  // a name, not a paragraph
    const std::size_t allowed = std::max<std::size_t>(1, wrong.size() / 3);
    std::optional<std::string> best;
    std::size_t best_distance = allowed + 1;
    for (const std::string_view name : known) {
        const std::size_t d = distance(wrong, name);
        if (d < best_distance) {
            best_distance = d;
            best = std::string(name);
        }
    }
    return best;
}

std::string did_you_mean(std::string_view wrong, std::span<const std::string_view> known) {
    const auto n = nearest_name(wrong, known);
    return n ? " (did you mean " + *n + "?)" : "";
}

}  // namespace cumemaudit
