#include "options_store.hpp"

#include "log.hpp"

#include <cstdlib>
#include <mutex>

namespace cumemaudit::shim {
namespace {

Options* g_options = nullptr;
std::once_flag g_once;

void load() {
    const char* env = std::getenv("CUMEMAUDIT_OPTIONS");
    ParsedOptions parsed = parse_options(env != nullptr ? env : "");
    if (!known_log_level(parsed.options.log_level)) {
        parsed.warnings.push_back("option log_level='" + clip(parsed.options.log_level) +
                                  "' in CUMEMAUDIT_OPTIONS is not error, warning, info or debug; using warning");
        parsed.options.log_level = "warning";
    }
    if (parsed.options.deepbind != "strip" && parsed.options.deepbind != "keep") {
        parsed.warnings.push_back("option deepbind='" + clip(parsed.options.deepbind) +
                                  "' in CUMEMAUDIT_OPTIONS is not strip or keep; using strip");
        parsed.options.deepbind = "strip";
    }
    if (parsed.options.mode != "audit" && parsed.options.mode != "enforce") {
        parsed.warnings.push_back("option mode='" + clip(parsed.options.mode) +
                                  "' in CUMEMAUDIT_OPTIONS is not audit or enforce; using audit");
        parsed.options.mode = "audit";
    }
    if (parsed.options.backend != "preload" && parsed.options.backend != "cupti" && parsed.options.backend != "both") {
        parsed.warnings.push_back("option backend='" + clip(parsed.options.backend) +
                                  "' in CUMEMAUDIT_OPTIONS is not preload, cupti or both; using preload");
        parsed.options.backend = "preload";
    }
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
