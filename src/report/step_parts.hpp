// step_parts: the shares of a step's driver-used memory that are named apart from the owners' live bytes,
// with the label every view gives them: written once here, read by diff, the html chart and table, and trace.
#pragma once

#include "report/report.hpp"

#include <array>
#include <cstdint>

namespace cumemaudit::report {

struct StepPart {
    const char* label;
    std::uint64_t Step::*bytes;
};

inline constexpr std::array kStepParts{
    StepPart{"other processes (NVML)", &Step::other_processes_bytes},
    StepPart{"contexts", &Step::context_bytes},
    StepPart{"kernel stacks", &Step::local_memory_bytes},
    StepPart{"managed memory on the device", &Step::managed_resident_bytes},
    StepPart{"module code and globals", &Step::module_code_bytes},
    StepPart{"device heaps (malloc)", &Step::malloc_heap_bytes},
    StepPart{"freed, kept by dma-buf fds", &Step::dma_buf_pinned_bytes},
};

}  // namespace cumemaudit::report
