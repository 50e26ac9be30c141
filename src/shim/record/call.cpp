#include "shim/record/call.hpp"

#include "shim/record/pc_cache.hpp"
#include "shim/services/python_stack.hpp"
#include "shim/record/recorder.hpp"
#include "shim/services/unwind.hpp"

#include <algorithm>
#include <atomic>
#include <array>
#include <memory>
#include <new>
#include <vector>

namespace cumemaudit::shim {

namespace {

constexpr int kMaxDepth = options::kMaxStackDepth;
constexpr int kMaxPythonDepth = options::kMaxPythonDepth;
constexpr int kOwnFrames = 8;  // frames of the shim itself above the caller, at most

// The shim's own frames above the caller, the most seen (3 on a wrapper's path in the LTO build). An unwind
// walks depth + that many frames, not depth + kOwnFrames: at a 16-frame VMM site, 19 frames where it
// walked 24, and each costs a cache miss or two after a real driver call.
std::atomic<int> g_own_frames{0};

// Frames from the caller outwards, innermost first. One frame is the caller's return address, free;
// more need an unwind, and the unwind starts inside the shim, so it is cut at the caller's frame. What it
// returns is what an unwind of depth + kOwnFrames frames gives: a walk that may have cut frames the site
// keeps is made again with room for them.
int capture(void* caller, int depth, ledger::Pc* out) {
    depth = std::clamp(depth, 1, kMaxDepth);
    out[0] = reinterpret_cast<ledger::Pc>(caller);
    if (depth == 1) return 1;
    std::array<void*, kMaxDepth + kOwnFrames> frames;
    for (int own = g_own_frames.load(std::memory_order_relaxed);;) {
        const int want = depth + own;
        const int n = unwind(frames.data(), want);
        const int at = static_cast<int>(std::find(frames.begin(), frames.begin() + n, caller) - frames.begin());
        if (n == want && own < kOwnFrames && (at == n || at > own)) {  // the stack went on past the walk
            own = at == n ? kOwnFrames : std::min(at, kOwnFrames);
            if (at < n && at > g_own_frames.load(std::memory_order_relaxed))
                g_own_frames.store(own, std::memory_order_relaxed);  // a race may keep the smaller: a walk more
            continue;
        }
        if (at == n) return 1;  // caller not on the unwound stack (no unwind info): keep it alone
        int k = 0;
        for (int i = at; i < n && k < depth; ++i) out[k++] = reinterpret_cast<ledger::Pc>(frames[i]);
        return k;
    }
}

}  // namespace

const ledger::Site& Call::site() {
    if (!have_site_) {
        have_site_ = true;
        const Recorder::Hot& o = recorder_.hot();
        const bool vmm = class_ != CallClass::classic;
        if (!vmm && o.stack_depth <= 1 && o.python_frames != options::PythonFrames::all &&
            cached_one_frame_site(recorder_.generation(), api_, reinterpret_cast<ledger::Pc>(caller_), &site_)) [[likely]]
            return site_;
        site_ = capture_site(vmm, o.python_frames == options::PythonFrames::all ||
                                      (vmm && o.python_frames == options::PythonFrames::vmm));
    }
    return site_;
}

ledger::Site Call::full_site() {
    return capture_site(true, recorder_.hot().python_frames != options::PythonFrames::none);
}

ledger::Site Call::capture_site(bool vmm, bool python) {
    const Recorder::Hot& o = recorder_.hot();
    const int depth = vmm ? o.vmm_stack_depth : o.stack_depth;
    if (depth <= 1 && !python) {
        // A classic call a Python binding made (ctypes, cffi, Cython) is named, and owned, by its Python
        // caller: the slow path is taken only then.
        bool binding = false;
        const ledger::Site one = one_frame_site(recorder_, api_, reinterpret_cast<ledger::Pc>(caller_), &binding);
        if (!binding || o.python_frames == options::PythonFrames::none) return one;
        python = true;
    }
    // Native frames, then the Python frames (tagged pcs): one trace, so a site is both together.
    ledger::Ledger& book = recorder_.ledger();
    std::array<ledger::Pc, kMaxDepth + kMaxPythonDepth> pcs;
    const int n = capture(caller_, depth, pcs.data());
    const int py = python ? python_stack(book.python_frames(), pcs.data() + n,
                                         std::clamp(o.python_depth, 0, kMaxPythonDepth))
                          : 0;
    const std::span<const ledger::Pc> frames(pcs.data(), static_cast<std::size_t>(n + py));
    return deep_site(recorder_, api_, frames, static_cast<std::size_t>(n));
}

}  // namespace cumemaudit::shim
