// pc_cache: what the shim learns about one return address, kept per thread — whether its object only passes
// memory on for somebody else (the shim, libcuda, cudart, CUPTI), the owner it maps to, and the trace of a
// one-frame site there. Sites repeat (the same line allocates again and again), so a call pays one compare
// where it would take the trace tree's lock and a dladdr. One cache serves the wrappers' sites, the owners
// of deep stacks and the CUPTI backend's search for the program's frame; a second one, whole deep stacks.
#pragma once

#include "ledger/ledger.hpp"
#include "shim/services/thread_state.hpp"

#include <span>

namespace cumemaudit::shim {

class Recorder;

// One return address. `passes_on` is the object's, the same under every recorder; the owner and the trace
// are ids of one recorder's ledger, valid while `generation` is that recorder's.
struct alignas(32) PcFacts {  // two a cache line, never one across two
    ledger::Pc pc = 0;
    std::uint64_t generation = 0;
    ledger::TraceId trace = 0;  // 0: not interned yet
    ledger::OwnerId owner = 0;
    bool owner_known = false;
    std::int8_t passes_on = -1;  // -1: not looked up
    bool binds = false;          // a Python binding (object_roles.hpp); valid once passes_on is
};
static_assert(sizeof(PcFacts) == 32);

inline constexpr std::size_t kPcEntries = 256;  // direct-mapped, 8 KiB a thread
inline std::size_t pc_slot(ledger::Pc pc) { return (pc >> 2) % kPcEntries; }

// The one-frame site of a call from `pc` under the recorder of `generation`, from this thread's cache alone,
// inline: every classic allocation asks, and the same few lines allocate again and again. False when only
// one_frame_site can answer (pc not seen, not learnt yet, another recorder, a Python binding).
[[gnu::always_inline]] inline bool cached_one_frame_site(std::uint64_t generation, const char* api, ledger::Pc pc,
                                                         ledger::Site* out) {
    const PcFacts* pcs = thread_state().pcs;
    if (pcs == nullptr) [[unlikely]] return false;
    const PcFacts& e = pcs[pc_slot(pc)];
    if (e.pc != pc || e.generation != generation || e.trace == 0 || e.passes_on < 0 || e.binds ||
        (!e.passes_on && !e.owner_known)) [[unlikely]]
        return false;
    *out = ledger::Site{api, e.trace, e.passes_on ? ledger::OwnerId{0} : e.owner};
    return true;
}

// The site of a call of `api` whose stack is the one frame `pc`. `binding`, when given, says whether pc
// lies in a Python binding (libffi, the interpreter, cuda-python's Cython): its Python caller is the place.
ledger::Site one_frame_site(Recorder&, const char* api, ledger::Pc pc, bool* binding = nullptr);

// The owner of a site whose frames are `frames` (innermost first, the first `native` of them native, Python
// frames after): the first native frame, before any Python binding (common/object_roles.hpp), whose object
// does not pass memory on names it; from a binding on, the file of the Python frame a person names does
// (common/user_frame.hpp, with the option skip_frames), so a leak made through ctypes, cffi or Cython is the
// calling script's or package's, never libffi's nor libc's under the interpreter, nor the program's own
// thin wrapper's. Without Python frames, that binding's own name. 0 when every frame passes on.
ledger::OwnerId owner_of(Recorder&, std::span<const ledger::Pc> frames, std::size_t native);

// The site of a call of `api` whose captured stack is `frames` (innermost first, the first `native` of
// them native, Python frames after). A deep stack repeats as a one-frame site does (a program makes its
// VMM calls from a few paths), and interning it walks the trace tree frame by frame, a lock and a hash
// lookup each: this thread's last stacks, compared frame for frame, answer for it.
ledger::Site deep_site(Recorder&, const char* api, std::span<const ledger::Pc> frames, std::size_t native);

// pc lies in an object that only passes calls on (common/object_roles.hpp: the shim, libcuda, cudart, CUPTI).
bool passes_on(ledger::Pc pc);

}  // namespace cumemaudit::shim
