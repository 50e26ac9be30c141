#include "shim/record/context_book.hpp"

#include "shim/services/context_query.hpp"

#include <algorithm>

namespace cumemaudit::shim {

void ContextBook::made(CUcontext ctx, int device, bool primary, bool measured, std::uint64_t charged_before,
                       std::uint64_t charged_after, history::Context facts) {
    facts.device = device;
    facts.primary = primary;
    facts.measured = measured && charged_after > charged_before;
    if (facts.measured) {
        // The creation's cost holds the stack the context began with; the stack is named on its own. A green
        // context has none of its own (it runs on the primary context's: measured), and its handle is no
        // context to ask the driver about.
        const std::uint64_t stack = facts.green ? 0 : stack_limit_of(ctx) * device_threads(device);
        const std::uint64_t cost = charged_after - charged_before;
        facts.fixed_bytes = cost > stack ? cost - stack : 0;
    }
    std::lock_guard lock(mu_);
    std::erase_if(live_, [&](const Live& l) { return l.ctx == ctx && !l.facts.destroyed; });
    if (live_.size() < history::kContextsKept) live_.push_back({ctx, std::move(facts)});
}

void ContextBook::ended(CUcontext ctx) {
    std::lock_guard lock(mu_);
    for (const Live& l : live_)
        if (l.ctx == ctx && l.facts.primary) {
            const std::int64_t device = l.facts.device;
            std::erase_if(live_, [&](const Live& g) { return g.facts.destroyed && g.facts.device == device; });
            break;
        }
    std::erase_if(live_, [&](const Live& l) { return l.ctx == ctx && !l.facts.destroyed; });
}

void ContextBook::green_destroyed(CUcontext green) {
    std::lock_guard lock(mu_);
    for (Live& l : live_)
        if (l.ctx == green && l.facts.green) l.facts.destroyed = true;
}

void ContextBook::stack_set(CUcontext ctx, std::uint64_t bytes_per_thread, const ledger::Site& site) {
    std::lock_guard lock(mu_);
    for (Live& l : live_)
        if (l.ctx == ctx) {
            l.facts.stack_set_bytes_per_thread = bytes_per_thread;
            l.facts.stack_set_site = site;
        }
}

void ContextBook::heap_reserved(CUcontext ctx, std::uint64_t bytes, std::string kernel, const ledger::Site& site) {
    std::lock_guard lock(mu_);
    for (Live& l : live_)
        if (l.ctx == ctx && !l.facts.destroyed && l.facts.malloc_heap_bytes == 0) {
            l.facts.malloc_heap_bytes = bytes;
            l.facts.malloc_heap_kernel = std::move(kernel);
            l.facts.malloc_heap_site = site;
            return;
        }
}

void ContextBook::stream_made(CUcontext ctx, std::uint64_t bytes, const ledger::Site& site) {
    std::lock_guard lock(mu_);
    for (Live& l : live_)
        if (l.ctx == ctx && !l.facts.destroyed) {
            ++l.facts.streams_created;
            if (bytes == 0) return;
            l.facts.stream_bytes += bytes;
            l.facts.stream_site = site;
            return;
        }
}

// Copied under the lock, asked outside it (the driver's answers take their time); what it said is kept for
// the report, which asks the driver nothing (it may be written from a signal handler).
std::vector<ContextBook::Live> ContextBook::live_now(CUcontext stack_gone) {
    std::vector<Live> out;
    {
        std::lock_guard lock(mu_);
        out = live_;
    }
    for (Live& l : out) {
        if (l.facts.green) continue;  // no stack of its own, and no context to ask
        l.facts.stack_bytes_per_thread = stack_limit_of(l.ctx);
        l.facts.local_memory_bytes =
            l.ctx == stack_gone ? 0 : l.facts.stack_bytes_per_thread * device_threads(static_cast<int>(l.facts.device));
    }
    std::lock_guard lock(mu_);
    for (Live& kept : live_)
        for (const Live& asked : out)
            if (kept.ctx == asked.ctx) {
                kept.facts.stack_bytes_per_thread = asked.facts.stack_bytes_per_thread;
                kept.facts.local_memory_bytes = asked.facts.local_memory_bytes;
            }
    return out;
}

ContextBook::Reserved ContextBook::reserved(int device, CUcontext stack_gone) {
    Reserved r;
    for (const Live& l : live_now(stack_gone)) {
        if (device >= 0 && l.facts.device != device) continue;
        r.context_bytes += l.facts.fixed_bytes + l.facts.stream_bytes;
        r.local_memory_bytes += l.facts.local_memory_bytes;
        r.malloc_heap_bytes += l.facts.malloc_heap_bytes;
        r.stack_bytes_per_thread = std::max(r.stack_bytes_per_thread, l.facts.stack_bytes_per_thread);
    }
    return r;
}

void ContextBook::copy_to(std::vector<history::Context>& out) const {
    std::lock_guard lock(mu_);
    for (const Live& l : live_) out.push_back(l.facts);
}

}  // namespace cumemaudit::shim
