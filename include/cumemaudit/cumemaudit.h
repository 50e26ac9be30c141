/* cumemaudit's C API: marks and checkpoints a program can place. When the program runs under the shim
 * (LD_PRELOAD=libcumemaudit.so) these reach it; a program that should run without it can look them up with
 * dlsym(RTLD_DEFAULT, "cumemaudit_step") and skip the call when the lookup fails. */
#ifndef CUMEMAUDIT_CUMEMAUDIT_H
#define CUMEMAUDIT_CUMEMAUDIT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the report now (atomically, replacing the last one). */
void cumemaudit_checkpoint(void);

/* Marks the end of training step `step`: records live bytes per owner at this moment. */
void cumemaudit_step(uint64_t step);

/* Marks a named moment (e.g. "after warmup"), recorded like a step. */
void cumemaudit_mark(const char* label);

/* A step mark carrying PyTorch's own figures (torch.cuda.memory_allocated / memory_reserved), so the step
 * splits driver-used memory into PyTorch allocated, PyTorch cached-but-free, other owners, unattributed. */
void cumemaudit_torch_step(uint64_t step, uint64_t allocated_bytes, uint64_t reserved_bytes);

/* PyTorch's own view of one memory pool ("default", or a CUDA graph pool), staged for the next
 * cumemaudit_torch_step or cumemaudit_torch_oom: bytes in live tensors and bytes the pool reserved. */
void cumemaudit_torch_pool(const char* pool, uint64_t allocated_bytes, uint64_t reserved_bytes);

/* PyTorch raised OutOfMemoryError for `requested_bytes` (its out-of-memory observer): the staged pools join
 * the report's latest `oom` record, and the report is written. */
void cumemaudit_torch_oom(uint64_t requested_bytes);

#ifdef __cplusplus
}
#endif

#endif
