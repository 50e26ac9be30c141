// pc_cache: what the shim learns about one return address, kept per thread — whether its object only passes
// memory on for somebody else (the shim, libcuda, cudart, CUPTI), the owner it maps to, and the trace of a
// one-frame site there. Sites repeat (the same line allocates again and again), so a call pays one compare
// where it would take the trace tree's lock and a dladdr. One cache serves the wrappers' sites, the owners
// of deep stacks and the CUPTI backend's search for the program's frame.
#pragma once

#include "ledger/ledger.hpp"

#include <span>

namespace cumemaudit::shim {

class Recorder;

// The site of a call of `api` whose stack is the one frame `pc`.
ledger::Site one_frame_site(Recorder&, const char* api, ledger::Pc pc);

// The owner of a site whose frames are `pcs` (innermost first): the first frame whose object does not pass
// memory on names it (owners.hpp); 0 when every frame passes on.
ledger::OwnerId owner_of(Recorder&, std::span<const ledger::Pc> pcs);

// pc lies in an object that only passes calls on (owners.hpp's is_intermediary, or libcupti).
bool passes_on(ledger::Pc pc);

// The calling thread's cache, freed at its exit.
void free_thread_pc_cache();

}  // namespace cumemaudit::shim
