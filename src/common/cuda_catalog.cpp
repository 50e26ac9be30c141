#include "cuda_catalog.hpp"

#include <array>

namespace cumemaudit::catalog {
namespace {

// Stringified with # directly, never through another macro: cuda.h (not included here, and it must stay
// that way) #defines base names to versioned ones, which would rewrite the symbols.
constexpr std::string_view twin_or_empty(std::string_view t) { return t == "none" ? std::string_view{} : t; }
constexpr std::array kEntries = {
#define CU_ENTRY(base, version, symbol, twin) Entry{base, version, #symbol, twin_or_empty(#twin)},
#include "cuda_catalog.inc"
#undef CU_ENTRY
};

constexpr std::uint64_t kPerThreadFlag = 2;  // CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM

}  // namespace

std::span<const Entry> entries() { return kEntries; }

Resolution resolve(std::string_view base, int version, std::uint64_t flags) {
    Resolution out;
    for (const Entry& e : kEntries) {
        if (e.base != base) continue;
        if (e.version > version) {
            if (out.status == Lookup::not_found) out.status = Lookup::version_too_low;
            continue;
        }
        if (out.entry == nullptr || e.version > out.entry->version) {
            out.entry = &e;
            out.status = Lookup::found;
        }
    }
    if (out.entry != nullptr) {
        const bool twin = (flags & kPerThreadFlag) != 0 && !out.entry->per_thread.empty();
        out.symbol = twin ? out.entry->per_thread : out.entry->symbol;
    }
    return out;
}

}  // namespace cumemaudit::catalog
