// object_roles: what part a shared object plays on the way from a program to the driver, told from its
// path alone: the CLI names the program's own frame of a site by it (a CI log's FAIL line). The shim's
// owner rules (who owns an allocation) judge the same objects.
#pragma once

#include <string_view>

namespace cumemaudit::object_roles {

// Objects that only pass memory on for somebody else: the shim, libcuda, cudart and CUPTI. `object` is a
// path or a basename.
bool passes_on(std::string_view object);

// Functions that allocate for their caller inside an object that otherwise owns what it allocates: NCCL's
// ncclMemAlloc and ncclMemFree (and their pnccl aliases), which PyTorch's MemPool, Megatron's user buffers,
// vLLM's and XLA's collectives call for memory that is theirs. `function` is a frame's symbol.
bool passes_on_function(std::string_view function);

// Objects that carry a Python program's call to the driver and own nothing themselves: libffi and ctypes'
// module, cffi's backend, the interpreter (libpython, the python executable) and cuda-python's Cython
// bindings.
bool is_python_binding(std::string_view object);

}  // namespace cumemaudit::object_roles
