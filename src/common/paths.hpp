// paths: the last component of a path ("libnccl.so.2" of "/usr/lib/libnccl.so.2"), written once for the
// owner rules, the intermediary objects, suppressions, report file names and the text views.
#pragma once

#include <string_view>

namespace cumemaudit {

constexpr std::string_view basename(std::string_view path) {
    const auto slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace cumemaudit
