// The C API of include/cumemaudit/cumemaudit.h. Programs may call it without linking us (dlsym with
// RTLD_DEFAULT finds it when the shim is preloaded); before the program has a CUDA context there is nothing
// to report, so these do nothing then: a process that never touches CUDA starts no thread and writes no
// report. A mark made once it has one starts the audit, even before its first allocation.
#include "cumemaudit/cumemaudit.h"

#include "shim/process/auditor.hpp"
#include "shim/boundary/hooks.hpp"
#include "shim/boundary/fence.hpp"
#include "shim/record/oom_watch.hpp"
#include "shim/record/site_line.hpp"
#include "common/option_types.hpp"
#include "common/options.hpp"
#include "report/build.hpp"
#include "report/human_bytes.hpp"
#include "report/report.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>

using cumemaudit::shim::Auditor;
using cumemaudit::shim::entered;
using cumemaudit::shim::guarded;

// Each body runs inside the fence (fence.hpp), cancellation held off: the program calling these never sees an
// exception, and a pthread_cancel of its thread takes effect after the call.

extern "C" {

__attribute__((visibility("default"))) void cumemaudit_checkpoint(void) {
    entered("cumemaudit_checkpoint", [] {
        if (Auditor* a = Auditor::reach(Auditor::Start::if_cuda_in_use)) a->checkpoint("cumemaudit_checkpoint()");
    });
}

__attribute__((visibility("default"))) void cumemaudit_step(uint64_t step) {
    entered("cumemaudit_step", [&] {
        if (Auditor* a = Auditor::reach(Auditor::Start::if_cuda_in_use)) a->step(step, nullptr);
    });
}

__attribute__((visibility("default"))) void cumemaudit_mark(const char* label) {
    entered("cumemaudit_mark", [&] {
        if (Auditor* a = Auditor::reach(Auditor::Start::if_cuda_in_use)) a->step(0, label != nullptr && *label != '\0' ? label : "mark");
    });
}

__attribute__((visibility("default"))) void cumemaudit_torch_step(uint64_t step, uint64_t allocated, uint64_t reserved) {
    entered("cumemaudit_torch_step", [&] {
        if (Auditor* a = Auditor::reach(Auditor::Start::if_cuda_in_use)) a->step(step, nullptr, allocated, reserved);
    });
}

__attribute__((visibility("default"))) int cumemaudit_leak_mark(cumemaudit_leak_mark_t* mark) {
    if (mark == nullptr) return -1;
    *mark = {};
    int answer = -1;
    entered("cumemaudit_leak_mark", [&] {
        // Before the program touched CUDA nothing is recorded and nothing starts: the zero mark is the
        // audit's start, so whatever is held later counts as after it.
        Auditor* a = Auditor::reach(Auditor::Start::if_cuda_in_use);
        if (a != nullptr) {
            mark->misuse_events = a->recorder().ledger().misuse_events();
            mark->epoch = a->recorder().ledger().begin_epoch();
        }
        answer = 0;
    });
    return answer;
}

__attribute__((visibility("default"))) int cumemaudit_held_since(const cumemaudit_leak_mark_t* mark,
                                                                  cumemaudit_held_t* held, char* site,
                                                                  size_t site_size) {
    if (mark == nullptr || held == nullptr) return -1;
    *held = {};
    if (site_size > 0) site[0] = '\0';
    cumemaudit::shim::Recorder* rec = nullptr;
    const auto reach = [&] {
        if (Auditor* a = Auditor::reach(Auditor::Start::if_cuda_in_use)) rec = &a->recorder();
    };
    if (!entered("cumemaudit_held_since", reach)) return -1;
    if (rec == nullptr) return 0;  // no CUDA yet: nothing is held
    try {
        const auto& ledger = rec->ledger();
        const auto now = ledger.held_since(static_cast<std::uint32_t>(mark->epoch));
        *held = {now.leaked_bytes, now.leaked_allocations, now.leaked_references, now.unfreed_bytes,
                 now.unfreed_allocations, ledger.misuse_events() - mark->misuse_events};
        if (site_size > 0 && !now.sites.empty()) {
            const std::string text = cumemaudit::shim::describe_stack(rec->ledger(), rec->symbolizer(), now.sites.front().first, 8,
                                                                     cumemaudit::user_frame::Skip(rec->options().skip_frames));
            const std::size_t n = std::min(text.size(), site_size - 1);
            std::memcpy(site, text.data(), n);
            site[n] = '\0';
        }
    } catch (...) {  // no exception crosses into the program; the counts filled so far stand
    }
    return 0;
}

__attribute__((visibility("default"))) int64_t cumemaudit_held_sites(const cumemaudit_leak_mark_t* mark, size_t max_sites,
                                                                      char* json, size_t json_size) {
    if (mark == nullptr) return -1;
    if (json_size > 0) json[0] = '\0';
    cumemaudit::shim::Recorder* rec = nullptr;
    const auto reach = [&] {
        if (Auditor* a = Auditor::reach(Auditor::Start::if_cuda_in_use)) rec = &a->recorder();
    };
    if (!entered("cumemaudit_held_sites", reach)) return -1;
    int64_t length = -1;
    entered("cumemaudit_held_sites", [&] {
        const auto held = rec != nullptr ? rec->ledger().held_since(static_cast<std::uint32_t>(mark->epoch))
                                         : decltype(rec->ledger().held_since(0)){};  // no CUDA yet: nothing held
        nlohmann::json sites = nlohmann::json::array();
        const cumemaudit::user_frame::Skip skip(rec != nullptr ? std::string_view(rec->options().skip_frames) : std::string_view{});
        for (std::size_t i = 0; i < held.sites.size() && i < max_sites; ++i)
            sites.push_back({{"bytes", held.sites[i].second},
                             {"site", cumemaudit::report::to_json(cumemaudit::report::site_of(rec->ledger(), &rec->symbolizer(),
                                                                                              held.sites[i].first, skip))}});
        const nlohmann::json answer = {{"sites_total", held.sites.size()}, {"sites", std::move(sites)}};
        // A Python file name need not be UTF-8; JSON text must be.
        const std::string text = answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        if (text.size() < json_size) std::memcpy(json, text.c_str(), text.size() + 1);
        length = static_cast<int64_t>(text.size());
    });
    return length;
}

__attribute__((visibility("default"))) int cumemaudit_parse_size(const char* text, uint64_t* bytes) {
    if (text == nullptr || bytes == nullptr) return -1;
    int answer = -1;
    guarded("cumemaudit_parse_size", [&] {
        try {
            *bytes = cumemaudit::options::Bytes(text);
            answer = 0;
        } catch (const cumemaudit::options::OptionError&) {
        }
    });
    return answer;
}

__attribute__((visibility("default"))) int cumemaudit_check_options(const char* text, char* problems,
                                                                   size_t problems_size) {
    if (problems != nullptr && problems_size != 0) problems[0] = '\0';
    if (text == nullptr) return 0;
    int count = -1;
    guarded("cumemaudit_check_options", [&] {
        const auto parsed = cumemaudit::options::parse_options(text);
        std::string lines;
        for (const std::string& w : parsed.warnings) lines += (lines.empty() ? "" : "\n") + w;
        if (problems != nullptr && problems_size != 0) {
            const std::size_t n = std::min(lines.size(), problems_size - 1);
            std::memcpy(problems, lines.data(), n);
            problems[n] = '\0';
        }
        count = static_cast<int>(parsed.warnings.size());
    });
    return count;
}

__attribute__((visibility("default"))) int cumemaudit_format_size(uint64_t bytes, char* text, size_t text_size) {
    if (text == nullptr || text_size == 0) return -1;
    text[0] = '\0';
    int answer = -1;
    guarded("cumemaudit_format_size", [&] {
        const std::string words = cumemaudit::report::human_bytes(bytes);
        if (words.size() >= text_size) return;
        std::memcpy(text, words.c_str(), words.size() + 1);
        answer = 0;
    });
    return answer;
}

}

extern "C" {

__attribute__((visibility("default"))) void cumemaudit_torch_pool(const char* pool, uint64_t allocated, uint64_t reserved) {
    entered("cumemaudit_torch_pool", [&] {
        if (Auditor* a = Auditor::reach(Auditor::Start::if_cuda_in_use)) a->recorder().torch_pools().stage({pool != nullptr ? pool : "", allocated, reserved});
    });
}

__attribute__((visibility("default"))) void cumemaudit_torch_pool_blocks(const char* pool, uint64_t free_blocks, uint64_t largest) {
    entered("cumemaudit_torch_pool_blocks", [&] {
        if (Auditor* a = Auditor::reach(Auditor::Start::if_cuda_in_use))
            a->recorder().torch_pools().blocks(pool != nullptr ? pool : "", free_blocks, largest);
    });
}

__attribute__((visibility("default"))) void cumemaudit_arena(const char* arena, uint64_t used, uint64_t reserved) {
    entered("cumemaudit_arena", [&] {
        if (Auditor* a = Auditor::reach(Auditor::Start::if_cuda_in_use)) a->recorder().arenas().stage({arena != nullptr ? arena : "", used, reserved});
    });
}

__attribute__((visibility("default"))) void cumemaudit_capture_profile(uint64_t trace_entries) {
    entered("cumemaudit_capture_profile", [&] {
        if (Auditor* a = Auditor::reach(Auditor::Start::if_cuda_in_use)) a->recorder().captures().begin(trace_entries);
    });
}

__attribute__((visibility("default"))) void cumemaudit_capture_hole(const char* line, const char* pool, uint64_t allocations,
                                                                    uint64_t allocated_bytes, uint64_t largest_bytes,
                                                                    uint64_t hole_bytes, uint64_t hole_blocks) {
    entered("cumemaudit_capture_hole", [&] {
        if (Auditor* a = Auditor::reach(Auditor::Start::if_cuda_in_use))
            a->recorder().captures().add({line != nullptr ? line : "", pool != nullptr ? pool : "", allocations,
                                          allocated_bytes, largest_bytes, hole_bytes, hole_blocks});
    });
}

__attribute__((visibility("default"))) void cumemaudit_torch_oom(uint64_t requested_bytes) {
    entered("cumemaudit_torch_oom", [&] {
        Auditor* a = Auditor::reach(Auditor::Start::if_cuda_in_use);
        if (a == nullptr) return;
        cumemaudit::shim::ShimScope busy;
        if (cumemaudit::shim::torch_out_of_memory(a->recorder(), requested_bytes)) a->oom_checkpoint();
    });
}

// ---- For measurement only (tests/bench/bench_calls --ab, tests/gpu/cost.py), not in cumemaudit.h ----
// One process times the same calls straight to the driver and through the wrappers, alternating call by
// call, in blocks recorded and blocks paused (the forwarding alone). Process-to-process noise on a GPU
// host is tens of percent; calls side by side in one process share memory, driver state and core, so a
// few percent can be told apart.

// The driver entry point the wrapper of `symbol` forwards to (null when the shim does not wrap it).
__attribute__((visibility("default"))) void* cumemaudit_bench_real(const char* symbol) {
    void* real = nullptr;
    entered("cumemaudit_bench_real", [&] {
        if (symbol == nullptr) return;
        const cumemaudit::shim::HookId id = cumemaudit::shim::find_hook(symbol);
        if (id != cumemaudit::shim::HookId::count) real = cumemaudit::shim::real_fn(id);
    });
    return real;
}

// While on, every wrapper of the process forwards without recording. Only between balanced blocks: an
// allocation made while on is unknown to the ledger when it is freed later. 0 done, -1 not recording.
__attribute__((visibility("default"))) int cumemaudit_bench_pass_through(int on) {
    int answer = -1;
    entered("cumemaudit_bench_pass_through", [&] {
        if (Auditor* a = Auditor::reach(Auditor::Start::always)) {
            cumemaudit::shim::Recorder* rec = &a->recorder();
            rec->pass_through(on != 0);
            answer = 0;
        }
    });
    return answer;
}

}
