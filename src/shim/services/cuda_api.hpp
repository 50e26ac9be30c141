// cuda_api: the CUDA headers as the shim needs them: the driver's, with the variants cuda.h hides declared
// (common/cuda_decls.hpp), and the runtime's for the cudart entry points it forwards.
#pragma once

#include "common/cuda_decls.hpp"

#include <cuda_runtime_api.h>
