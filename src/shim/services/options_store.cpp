#include "shim/services/options_store.hpp"

#include "shim/services/log.hpp"

#include <cstdlib>
#include <mutex>

namespace cumemaudit::shim {
namespace {

Options* g_options = nullptr;
std::once_flag g_once;

void load() {
    const char* env = std::getenv("CUMEMAUDIT_OPTIONS");
    options::ParsedOptions parsed = options::parse_options(env != nullptr ? env : "");
    set_log_level(parsed.options.log_level);
    for (const auto& w : parsed.warnings) log_warning("{}", w);
    g_options = new Options(std::move(parsed.options));  // never freed: read until _exit
}

}  // namespace

const Options& current_options() {
    std::call_once(g_once, load);
    return *g_options;
}

}  // namespace cumemaudit::shim
