// owners: who an allocation belongs to — the shared object of the first caller frame that neither passes
// memory on (the shim, libcuda, cudart, CUPTI) nor only binds Python to the driver (libffi, ctypes, the
// interpreter: then the calling Python file), mapped by rules over its normalised path or its name
// (…/site-packages/torch/… → pytorch, libnccl* → nccl, …), or else named after where it lives (its package
// under site-packages, <lib> of a wheel's nvidia/<lib>/lib) or its name. The roles are
// common/object_roles.hpp's; the walk over a stack is pc_cache.hpp's, looked up by return address so the hot
// path pays one compare.
#pragma once

#include "ledger/ledger.hpp"

#include <string>
#include <string_view>

namespace cumemaudit::shim {

// The owner name the rules give an object file (a path, normalised here, or a basename).
std::string owner_name_for_object(std::string_view object);

// The path of the object holding return address `pc`, as the loader opened it; empty if none. With
// `function`, also the exported symbol the address lies in ("" when none does).
std::string object_of(ledger::Pc pc, std::string* function = nullptr);

}  // namespace cumemaudit::shim
