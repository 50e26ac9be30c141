// cuda_api: the CUDA headers as the shim needs them. cuda.h #defines some entry points to their newest
// variant (cuGetProcAddress → _v2, cuIpcOpenMemHandle → _v2); the shim exports the older variants too,
// under their own names, so those #defines are undone here, in one place, for every shim file.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#undef cuGetProcAddress
#undef cuIpcOpenMemHandle
