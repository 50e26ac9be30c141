// owners: who an allocation belongs to — the shared object of the first caller frame outside the shim,
// libcuda and cudart, mapped by rules over its normalised path or its name (…/site-packages/torch/… →
// pytorch, libnccl* → nccl, …), or else named after where it lives (its package under site-packages, <lib>
// of a wheel's nvidia/<lib>/lib) or its name. Looked up by return address and cached per thread, so the hot path pays one compare.
#pragma once

#include "ledger/ledger.hpp"

#include <span>
#include <string>
#include <string_view>

namespace cumemaudit::shim {

// Objects that only pass memory on for somebody else (the shim, libcuda, cudart): the owner is whoever
// called them. `object` is a path or a basename.
bool is_intermediary(std::string_view object);

// The owner name the rules give an object file (a path, normalised here, or a basename).
std::string owner_name_for_object(std::string_view object);

// The owner of a site whose frames are `pcs` (innermost first), registered in `ledger`.
ledger::OwnerId owner_of(std::span<const ledger::Pc> pcs, ledger::Ledger& ledger);

}  // namespace cumemaudit::shim
