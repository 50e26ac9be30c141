// program: what the test programs share, so each shows only its own call sequence — stopping
// with the program's name, the properties of pinned device memory, and the read-write access a mapping
// needs. The CUDA calls themselves stay in each program: their file:line is what the audit reports.
#pragma once

#include <cuda.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace cumemaudit::program {

// "<program>: <what>" on stderr, exit 2: a program that cannot go on says why, and fails apart from a gate (23).
[[noreturn]] inline void die(const std::string& what) {
    std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, what.c_str());
    std::exit(2);
}

// Pinned memory on `device`, exportable as `handle_types`.
inline CUmemAllocationProp device_prop(int device, unsigned handle_types) {
    CUmemAllocationProp p{};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = device;
    p.requestedHandleTypes = static_cast<CUmemAllocationHandleType>(handle_types);
    return p;
}

// Read-write access for `device`, as cuMemSetAccess takes it after cuMemMap.
inline CUmemAccessDesc read_write(int device) {
    CUmemAccessDesc a{};
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = device;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return a;
}

}  // namespace cumemaudit::program
