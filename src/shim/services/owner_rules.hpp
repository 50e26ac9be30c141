// owners: who an allocation belongs to — the shared object of the first caller frame outside the shim,
// libcuda and cudart, mapped by rules over its normalised path or its name (…/site-packages/torch/… →
// pytorch, libnccl* → nccl, …), or else named after where it lives (its package under site-packages, <lib>
// of a wheel's nvidia/<lib>/lib) or its name. Looked up by return address through pc_cache.hpp, so the hot
// path pays one compare.
#pragma once

#include "ledger/ledger.hpp"

#include <string>
#include <string_view>

namespace cumemaudit::shim {

// Objects that only pass memory on for somebody else (the shim, libcuda, cudart): the owner is whoever
// called them. `object` is a path or a basename.
bool is_intermediary(std::string_view object);

// The owner name the rules give an object file (a path, normalised here, or a basename).
std::string owner_name_for_object(std::string_view object);

// CUPTI's library, which stands between the program and the driver in a callback's stack.
bool is_cupti(std::string_view object);

// The path of the object holding return address `pc`, as the loader opened it; empty if none.
std::string object_of(ledger::Pc pc);

}  // namespace cumemaudit::shim
