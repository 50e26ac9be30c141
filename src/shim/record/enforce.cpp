#include "shim/record/enforce.hpp"

#include "shim/record/enforcer.hpp"
#include "shim/services/loader.hpp"
#include "shim/services/log.hpp"
#include "shim/record/recorder.hpp"
#include "shim/record/site_line.hpp"

#include "report/human_bytes.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

namespace cumemaudit::shim {
namespace {

using State = Enforcer::State;

std::uint64_t this_thread() { return static_cast<std::uint64_t>(pthread_self()); }

// Virtual values stand apart from any real handle value: the program cannot confuse the two.
constexpr std::uint64_t kVirtualBase = 0xC0DE000000000000ull;

// Hands `real` to the program: its current virtual value (a retain, or an import the driver answered with
// a handle it already gave), or a fresh one for a fresh creation.
std::uint64_t hand_out(State& s, std::uint64_t real, bool fresh) {
    std::lock_guard lock(s.mu);
    if (auto it = s.current.find(real); it != s.current.end() && !fresh) return it->second;
    const std::uint64_t v = kVirtualBase + s.next++;
    s.virtuals[v] = Enforcer::Virtual{real, 0};
    s.current[real] = v;
    return v;
}

// The real value behind `v` while it is that value's current virtual one; nullopt for a value never handed
// out, or one whose references are all gone (released, or reclaimed).
std::optional<std::uint64_t> real_of(State& s, std::uint64_t v) {
    std::lock_guard lock(s.mu);
    auto it = s.virtuals.find(v);
    if (it == s.virtuals.end()) return std::nullopt;
    auto cur = s.current.find(it->second.real);
    if (cur == s.current.end() || cur->second != v) return std::nullopt;
    return it->second.real;
}

// After a release of `real` (the program's or the shim's) was recorded: once the ledger counts no
// reference through it, the driver may hand the value out again, and then it gets a new virtual value.
// Called with the state lock held.
void retire_if_released(State& s, const ledger::Ledger& book, std::uint64_t real) {
    auto cur = s.current.find(real);
    if (cur == s.current.end() || book.references_through(real) > 0) return;
    if (auto v = s.virtuals.find(cur->second); v != s.virtuals.end() && v->second.reclaimed == 0) s.virtuals.erase(v);
    s.current.erase(cur);
}

// A handle the program passed that no driver would take is refused with the driver's own code, never
// passed on as garbage.
CUresult refuse(Call& call, const char* api) {
    log_error("mode=enforce: {} of a handle this process does not hold, at {}; refused with CUDA_ERROR_INVALID_VALUE",
              api, describe_site(call.recorder().ledger(), call.recorder().symbolizer(), call.site(),
                            user_frame::Skip(call.recorder().options().skip_frames)));
    return CUDA_ERROR_INVALID_VALUE;
}

}  // namespace

State& state_of(Call& call) { return call.recorder().enforcer().state(); }

std::optional<CUresult> enforce_before(ev::Release, Call& call, CUmemGenericAllocationHandle& handle) {
    State& s = state_of(call);
    {
        std::lock_guard lock(s.mu);
        auto it = s.virtuals.find(handle);
        if (it != s.virtuals.end() && it->second.reclaimed > 0) {
            // The shim released this reference already: the program's own release is the one it owed.
            if (--it->second.reclaimed == 0 && !s.current.count(it->second.real)) s.virtuals.erase(it);
            return CUDA_SUCCESS;
        }
    }
    const auto real = real_of(state_of(call), handle);
    if (!real) {
        // As without the shim: a second release is the driver's CUDA_ERROR_INVALID_VALUE, and misuse.
        call.recorder().ledger().released(handle, false, result_name(CUDA_ERROR_INVALID_VALUE), call.site());
        return CUDA_ERROR_INVALID_VALUE;
    }
    handle = *real;
    return std::nullopt;
}

std::optional<CUresult> enforce_before(ev::Map, Call& call, CUdeviceptr&, size_t&, size_t&,
                                       CUmemGenericAllocationHandle& handle, unsigned long long&) {
    const auto real = real_of(state_of(call), handle);
    if (!real) return refuse(call, "cuMemMap");
    handle = *real;
    return std::nullopt;
}

std::optional<CUresult> enforce_before(ev::Export, Call& call, void*&, CUmemGenericAllocationHandle& handle,
                                       CUmemAllocationHandleType&, unsigned long long&) {
    const auto real = real_of(state_of(call), handle);
    if (!real) return refuse(call, "cuMemExportToShareableHandle");
    handle = *real;
    return std::nullopt;
}

std::optional<CUresult> enforce_before(ev::Properties, Call& call, CUmemAllocationProp*&,
                                       CUmemGenericAllocationHandle& handle) {
    const auto real = real_of(state_of(call), handle);
    if (!real) return refuse(call, "cuMemGetAllocationPropertiesFromHandle");
    handle = *real;
    return std::nullopt;
}

// Both handles of a bind, and the object's of the other multicast calls: NCCL's NVLS set-up binds the
// memory it just created to the object it just created or imported.
namespace {
bool translate(Call& call, CUmemGenericAllocationHandle& handle) {
    const auto real = real_of(state_of(call), handle);
    if (real) handle = *real;
    return real.has_value();
}
}  // namespace

std::optional<CUresult> enforce_before(ev::McAddDevice, Call& call, CUmemGenericAllocationHandle& mc, CUdevice&) {
    if (!translate(call, mc)) return refuse(call, "cuMulticastAddDevice");
    return std::nullopt;
}

std::optional<CUresult> enforce_before(ev::McBindMem, Call& call, CUmemGenericAllocationHandle& mc, size_t&,
                                       CUmemGenericAllocationHandle& mem, size_t&, size_t&, unsigned long long&) {
    if (!translate(call, mc) || !translate(call, mem)) return refuse(call, "cuMulticastBindMem");
    return std::nullopt;
}

std::optional<CUresult> enforce_before(ev::McBindAddr, Call& call, CUmemGenericAllocationHandle& mc, size_t&,
                                       CUdeviceptr&, size_t&, unsigned long long&) {
    if (!translate(call, mc)) return refuse(call, "cuMulticastBindAddr");
    return std::nullopt;
}

std::optional<CUresult> enforce_before(ev::McUnbind, Call& call, CUmemGenericAllocationHandle& mc, CUdevice&, size_t&,
                                       size_t&) {
    if (!translate(call, mc)) return refuse(call, "cuMulticastUnbind");
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
        const auto real = real_of(state_of(call), m.memHandle.memHandle);
        if (!real) return refuse(call, "cuMemMapArrayAsync");
        m.memHandle.memHandle = *real;
    }
    list = copy.data();
    return std::nullopt;
}

void enforce_after(ev::Create, Call& call, CUresult r, CUmemGenericAllocationHandle* handle, size_t, const CUmemAllocationProp*,
                   unsigned long long) {
    if (r == CUDA_SUCCESS && handle != nullptr) *handle = hand_out(state_of(call), *handle, true);
}

void enforce_after(ev::McCreate, Call& call, CUresult r, CUmemGenericAllocationHandle* handle, const CUmulticastObjectProp*) {
    if (r == CUDA_SUCCESS && handle != nullptr) *handle = hand_out(state_of(call), *handle, true);
}

void enforce_after(ev::Retain, Call& call, CUresult r, CUmemGenericAllocationHandle* handle, void*) {
    if (r == CUDA_SUCCESS && handle != nullptr) *handle = hand_out(state_of(call), *handle, false);
}

void enforce_after(ev::Import, Call& call, CUresult r, CUmemGenericAllocationHandle* handle, void*, CUmemAllocationHandleType) {
    if (r == CUDA_SUCCESS && handle != nullptr) *handle = hand_out(state_of(call), *handle, false);
}

void enforce_after(ev::Release, Call& call, CUresult r, CUmemGenericAllocationHandle real) {
    if (r != CUDA_SUCCESS) return;
    State& s = state_of(call);
    std::lock_guard lock(s.mu);
    retire_if_released(s, call.recorder().ledger(), real);
}

// Not reclaimed here: DeepEP's free() retains, unmaps, frees the range and only then releases its retain.
// The allocations are remembered with the thread that freed the range and looked at again later.
void enforce_after(ev::AddressFree, Call& call, CUresult r, CUdeviceptr va, size_t size) {
    if (r != CUDA_SUCCESS) return;
    std::vector<ledger::Ledger::Unreachable> found = call.recorder().ledger().unreachable_in(va, size);
    if (found.empty()) return;
    State& s = state_of(call);
    std::lock_guard lock(s.mu);
    for (const auto& u : found) s.pending.push_back(Enforcer::Pending{u.id, this_thread()});
    s.any_pending.store(true, std::memory_order_release);
}

void reclaim_pending(Recorder& rec, bool every_thread) {
    State& s = rec.enforcer().state();
    if (!s.any_pending.load(std::memory_order_acquire)) return;  // the allocation path's whole cost
    std::vector<std::uint64_t> ids;
    {
        std::lock_guard lock(s.mu);
        const std::uint64_t me = this_thread();
        std::erase_if(s.pending, [&](const Enforcer::Pending& p) {
            if (!every_thread && p.thread != me) return false;
            ids.push_back(p.id);
            return true;
        });
        s.any_pending.store(!s.pending.empty(), std::memory_order_release);
    }
    if (ids.empty()) return;
    ledger::Ledger& book = rec.ledger();
    using Release = CUresult(CUDAAPI*)(CUmemGenericAllocationHandle);
    auto release = reinterpret_cast<Release>(driver_entry("cuMemRelease"));
    if (release == nullptr) return;
    // The ledger's own view, asked now: only references still held with nothing mapped are reclaimed, the
    // same ones the audit classes unreachable.
    for (const ledger::Ledger::Unreachable& u : book.still_unreachable(ids)) {
        std::size_t released = 0;
        for (std::uint64_t real : u.handles) {
            CUresult rr;
            {
                DriverScope in_driver;
                rr = release(real);
            }
            book.released(real, rr == CUDA_SUCCESS, result_name(rr), ledger::Site{"cuMemRelease (enforce)", 0, 0});
            if (rr != CUDA_SUCCESS) continue;
            ++released;
            std::lock_guard lock(s.mu);
            if (auto cur = s.current.find(real); cur != s.current.end()) ++s.virtuals[cur->second].reclaimed;
            retire_if_released(s, book, real);
        }
        // The ledger retires references LIFO: the ones released are the newest `released` sites.
        const std::vector<ledger::Site> sites(u.sites.end() - static_cast<std::ptrdiff_t>(std::min(released, u.sites.size())),
                                              u.sites.end());
        std::string taken_by;
        {
            std::lock_guard lock(s.mu);
            std::map<Enforcer::SiteKey, std::uint32_t> refs_by_site;
            for (const ledger::Site& site : sites) ++refs_by_site[Enforcer::SiteKey{site.api, site.trace, site.owner}];
            for (const ledger::Site& site : sites) {
                const Enforcer::SiteKey key{site.api, site.trace, site.owner};
                auto n = refs_by_site.find(key);
                if (n == refs_by_site.end()) continue;  // this site's row is done for this allocation
                history::Reclaim& row = s.reclaimed[key];
                row.site = site;
                row.bytes += u.bytes;
                row.allocations += 1;
                row.references += n->second;
                row.members.push_back(ledger::HeldAllocation{u.id, u.bytes});
                taken_by += (taken_by.empty() ? "" : "; ") + describe_site(book, rec.symbolizer(), site, user_frame::Skip(rec.options().skip_frames));
                refs_by_site.erase(n);
            }
        }
        log_warning("mode=enforce: reclaimed {} held by {} reference(s) nothing could release any more; taken by {}",
                    report::human_bytes(u.bytes), released, taken_by);
    }
}

}  // namespace cumemaudit::shim
