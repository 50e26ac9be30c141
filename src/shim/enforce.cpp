#include "enforce.hpp"

#include "auditor.hpp"
#include "hooks.hpp"
#include "log.hpp"
#include "options_store.hpp"
#include "site_text.hpp"

#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

namespace cumemaudit::shim {
namespace {

// A handle value the program holds. `refs` counts the program's references through it; `reclaimed` those
// the shim already released for it, which the program's own late releases use up.
struct Virtual {
    std::uint64_t real = 0;
    std::uint32_t refs = 0;
    std::uint32_t reclaimed = 0;
};

struct SiteKey {
    const char* api;
    ledger::TraceId trace;
    ledger::OwnerId owner;
    friend bool operator<(const SiteKey& a, const SiteKey& b) {
        return std::tie(a.api, a.trace, a.owner) < std::tie(b.api, b.trace, b.owner);
    }
};

// VMM calls are rare and slow (tens of µs): one mutex keeps the two maps consistent.
struct State {
    std::mutex mu;
    std::uint64_t next = 1;
    std::unordered_map<std::uint64_t, Virtual> virtuals;  // virtual value → what it stands for
    std::unordered_map<std::uint64_t, std::uint64_t> current;  // live real value → its virtual value
    std::map<SiteKey, report::ReclaimInput> reclaimed;
};

State* g_enforce_state = nullptr;

State& state() {
    static State* first = g_enforce_state = new State;  // used until _exit
    (void)first;
    return *g_enforce_state;
}

// Virtual values stand apart from any real handle value: the program cannot confuse the two.
constexpr std::uint64_t kVirtualBase = 0xC0DE000000000000ull;

std::string mib(std::uint64_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20)); }

// Hands `real` to the program: its current virtual value gains a reference (retain, or an import the
// driver answered with a handle it already gave), or a fresh one is made.
std::uint64_t hand_out(std::uint64_t real, bool fresh) {
    State& s = state();
    std::lock_guard lock(s.mu);
    if (auto it = s.current.find(real); it != s.current.end() && !fresh) {
        ++s.virtuals[it->second].refs;
        return it->second;
    }
    const std::uint64_t v = kVirtualBase + s.next++;
    s.virtuals[v] = Virtual{real, 1, 0};
    s.current[real] = v;
    return v;
}

// The real value behind `v` if the driver still knows it; nullopt for a value never handed out or one
// whose references were all reclaimed.
std::optional<std::uint64_t> real_of(std::uint64_t v) {
    State& s = state();
    std::lock_guard lock(s.mu);
    auto it = s.virtuals.find(v);
    if (it == s.virtuals.end() || it->second.refs == it->second.reclaimed) return std::nullopt;
    return it->second.real;
}

// A handle the program passed that no driver would take is refused with the driver's own code, never
// passed on as garbage.
CUresult refuse(Call& call, const char* api) {
    log_error("mode=enforce: {} of a handle this process does not hold, at {}; refused with CUDA_ERROR_INVALID_VALUE",
              api, describe_site(call.site()));
    return CUDA_ERROR_INVALID_VALUE;
}

}  // namespace

bool enforcing() {
    static const bool on = current_options().mode == "enforce";
    return on;
}

std::optional<CUresult> enforce_before(ev::Release, Call& call, CUmemGenericAllocationHandle& handle) {
    State& s = state();
    {
        std::lock_guard lock(s.mu);
        auto it = s.virtuals.find(handle);
        if (it != s.virtuals.end() && it->second.reclaimed > 0) {
            // The shim released this reference already: the program's own release is the one it owed.
            --it->second.reclaimed;
            if (--it->second.refs == 0) s.virtuals.erase(it);
            return CUDA_SUCCESS;
        }
    }
    const auto real = real_of(handle);
    if (!real) {
        // As without the shim: a second release is the driver's CUDA_ERROR_INVALID_VALUE, and misuse.
        Auditor::get().ledger().released(handle, false, "CUDA_ERROR_INVALID_VALUE", call.site());
        return CUDA_ERROR_INVALID_VALUE;
    }
    handle = *real;
    return std::nullopt;
}

std::optional<CUresult> enforce_before(ev::Map, Call& call, CUdeviceptr&, size_t&, size_t&,
                                       CUmemGenericAllocationHandle& handle, unsigned long long&) {
    const auto real = real_of(handle);
    if (!real) return refuse(call, "cuMemMap");
    handle = *real;
    return std::nullopt;
}

std::optional<CUresult> enforce_before(ev::Export, Call& call, void*&, CUmemGenericAllocationHandle& handle,
                                       CUmemAllocationHandleType&, unsigned long long&) {
    const auto real = real_of(handle);
    if (!real) return refuse(call, "cuMemExportToShareableHandle");
    handle = *real;
    return std::nullopt;
}

std::optional<CUresult> enforce_before(ev::Properties, Call& call, CUmemAllocationProp*&,
                                       CUmemGenericAllocationHandle& handle) {
    const auto real = real_of(handle);
    if (!real) return refuse(call, "cuMemGetAllocationPropertiesFromHandle");
    handle = *real;
    return std::nullopt;
}

std::optional<CUresult> enforce_before(ev::MapArray, Call& call, CUarrayMapInfo*& list, unsigned int& count, CUstream&) {
    if (list == nullptr || count == 0) return std::nullopt;  // the driver's own answer
    // The driver reads the list during the call (the mapping itself is stream-ordered), so a per-thread
    // copy lives long enough.
    thread_local std::vector<CUarrayMapInfo> copy;
    copy.assign(list, list + count);
    for (CUarrayMapInfo& m : copy) {
        if (m.memOperationType != CU_MEM_OPERATION_TYPE_MAP || m.memHandleType != CU_MEM_HANDLE_TYPE_GENERIC) continue;
        const auto real = real_of(m.memHandle.memHandle);
        if (!real) return refuse(call, "cuMemMapArrayAsync");
        m.memHandle.memHandle = *real;
    }
    list = copy.data();
    return std::nullopt;
}

void enforce_after(ev::Create, CUresult r, CUmemGenericAllocationHandle* handle, size_t, const CUmemAllocationProp*,
                   unsigned long long) {
    if (r == CUDA_SUCCESS && handle != nullptr) *handle = hand_out(*handle, true);
}

void enforce_after(ev::Retain, CUresult r, CUmemGenericAllocationHandle* handle, void*) {
    if (r == CUDA_SUCCESS && handle != nullptr) *handle = hand_out(*handle, false);
}

void enforce_after(ev::Import, CUresult r, CUmemGenericAllocationHandle* handle, void*, CUmemAllocationHandleType) {
    if (r == CUDA_SUCCESS && handle != nullptr) *handle = hand_out(*handle, false);
}

void enforce_after(ev::Release, CUresult r, CUmemGenericAllocationHandle real) {
    if (r != CUDA_SUCCESS) return;
    State& s = state();
    std::lock_guard lock(s.mu);
    auto cur = s.current.find(real);
    if (cur == s.current.end()) return;
    auto v = s.virtuals.find(cur->second);
    if (v != s.virtuals.end() && --v->second.refs == 0) {
        s.virtuals.erase(v);
        s.current.erase(cur);  // the driver may hand this real value out again: it gets a new virtual one
    }
}

void enforce_after(ev::AddressFree, CUresult r, CUdeviceptr va, size_t size) {
    if (r != CUDA_SUCCESS) return;
    Auditor& a = Auditor::get();
    using Release = CUresult(CUDAAPI*)(CUmemGenericAllocationHandle);
    auto release = reinterpret_cast<Release>(real_fn(HookId::cuMemRelease));
    for (const ledger::Ledger::Unreachable& u : a.ledger().unreachable_in(va, size)) {
        const ledger::Site culprit = u.sites.empty() ? ledger::Site{} : u.sites.front();
        std::size_t released = 0;
        for (std::uint64_t real : u.handles) {
            CUresult rr;
            {
                DriverScope in_driver;
                rr = release(real);
            }
            a.ledger().released(real, rr == CUDA_SUCCESS, result_name(rr), ledger::Site{"cuMemRelease (enforce)", 0, 0});
            if (rr != CUDA_SUCCESS) continue;
            ++released;
            State& s = state();
            std::lock_guard lock(s.mu);
            if (auto cur = s.current.find(real); cur != s.current.end()) {
                ++s.virtuals[cur->second].reclaimed;
                // Once every reference is reclaimed the real value is the driver's to reuse.
                if (s.virtuals[cur->second].reclaimed == s.virtuals[cur->second].refs) s.current.erase(cur);
            }
        }
        {
            State& s = state();
            std::lock_guard lock(s.mu);
            report::ReclaimInput& row = s.reclaimed[SiteKey{culprit.api, culprit.trace, culprit.owner}];
            row.site = culprit;
            row.reclaim.bytes += u.bytes;
            row.reclaim.allocations += 1;
            row.reclaim.references += released;
        }
        log_warning("mode=enforce: reclaimed {} held by {} reference(s) nothing could release any more; taken by {}",
                    mib(u.bytes), released, describe_site(culprit));
    }
}

std::vector<report::ReclaimInput> reclaimed() {
    State& s = state();
    std::lock_guard lock(s.mu);
    std::vector<report::ReclaimInput> out;
    for (const auto& [key, row] : s.reclaimed) out.push_back(row);
    return out;
}

void reset_enforcer() {
    // A fork child: a parent thread may have held the lock, or been halfway through a map update, when
    // another thread forked. The old state is left as it is (never touched again) and a fresh one begins.
    state();
    g_enforce_state = new State;
}

}  // namespace cumemaudit::shim
