/* cumemaudit's C API: marks and checkpoints a program can place. When the program runs under the shim
 * (LD_PRELOAD=libcumemaudit.so) these reach it; a program that should run without it can look them up with
 * dlsym(RTLD_DEFAULT, "cumemaudit_step") and skip the call when the lookup fails. */
#ifndef CUMEMAUDIT_CUMEMAUDIT_H
#define CUMEMAUDIT_CUMEMAUDIT_H

#include <stddef.h>
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

/* Per-test accounting (the pytest plugin's gate): a mark, then what allocations made since it still hold. */
typedef struct cumemaudit_leak_mark_t {
    uint64_t epoch;          /* allocations made from here on are counted */
    uint64_t misuse_events;  /* misuse recorded before the mark */
} cumemaudit_leak_mark_t;

typedef struct cumemaudit_held_t {
    uint64_t leaked_bytes;         /* references held, nothing mapped, no export fd: nothing can free it */
    uint64_t leaked_allocations;
    uint64_t leaked_references;
    uint64_t unfreed_bytes;        /* classic allocations (cuMemAlloc*, cudaMalloc, ...) still live */
    uint64_t unfreed_allocations;
    uint64_t misuse_events;        /* misuse recorded since the mark */
} cumemaudit_held_t;

/* Fills `mark` with now. Returns 0, or -1 when the audit could not start (then `mark` is zeroed). */
int cumemaudit_leak_mark(cumemaudit_leak_mark_t* mark);

/* Fills `held` with what allocations made since `mark` still hold and, when site_size > 0, `site` with the
 * largest leaking site as one NUL-terminated line ("" when nothing leaked), truncated to site_size. Returns
 * 0, or -1 when the audit could not start. Scans live allocations: for test boundaries, not hot loops. */
int cumemaudit_held_since(const cumemaudit_leak_mark_t* mark, cumemaudit_held_t* held, char* site, size_t site_size);
/* The sites behind held_since's leaked bytes, largest first, as JSON text:
 *   {"sites_total": N, "sites": [{"bytes": B, "site": {"api", "frames", "python_frames"}}, ...]}
 * with at most max_sites entries, each site as a report's leak row carries it (frames innermost first). An
 * allocation is counted at each site that holds a reference to it. Written NUL-terminated into `json` when
 * it fits in json_size; returns its length without the NUL (a caller whose buffer was short calls again
 * with a bigger one), or -1 when the audit could not start. Symbolizes: for a test's failure, not loops. */
int64_t cumemaudit_held_sites(const cumemaudit_leak_mark_t* mark, size_t max_sites, char* json, size_t json_size);

/* Parses a size as CUMEMAUDIT_OPTIONS and the CLI take it (growth_alarm=256MiB): a byte count, or a number
 * and one of the units B, KiB, MiB, GiB, TiB (powers of 1024), e.g. "4194304", "4MiB", "1.5 GiB". Sets
 * *bytes and returns 0, or returns -1 when `text` is not such a size. Needs no CUDA. */
int cumemaudit_parse_size(const char* text, uint64_t* bytes);
/* Writes `bytes` NUL-terminated as every text view shows a size ("4.0 MiB", below 1 KiB "512 B") into
 * `text`. Returns 0, or -1 when text_size is too small (16 always suffices). Needs no CUDA. */
int cumemaudit_format_size(uint64_t bytes, char* text, size_t text_size);
/* Checks CUMEMAUDIT_OPTIONS text (key=value pairs separated by ':') as the shim and the CLI read it, against
 * the one options table: returns how many problems it has (0: none), and writes them NUL-terminated, one a
 * line, into `problems` as far as they fit (a misspelt key names the nearest one: "did you mean ...?").
 * Needs no CUDA; starts nothing. */
int cumemaudit_check_options(const char* text, char* problems, size_t problems_size);
/* PyTorch's own view of one memory pool ("default", or a CUDA graph pool), staged for the next
 * cumemaudit_torch_step or cumemaudit_torch_oom: bytes in live tensors and bytes the pool reserved. */
void cumemaudit_torch_pool(const char* pool, uint64_t allocated_bytes, uint64_t reserved_bytes);
/* The free blocks of the pool last staged under that name: how many, and the largest. Its reserved but
 * unallocated bytes are split among them; a request larger than the largest fits none of them. */
void cumemaudit_torch_pool_blocks(const char* pool, uint64_t free_blocks, uint64_t largest_free_block_bytes);

/* Another framework's arena on the device ("cupy", "jax:0"), as its own statistics say: bytes in use and bytes
 * it holds. Staged for the next mark, and named in out-of-memory records until the mark after it. */
void cumemaudit_arena(const char* arena, uint64_t used_bytes, uint64_t reserved_bytes);

/* A capture profile (Python: cumemaudit.capture_profile): cumemaudit_capture_profile begins a new one, replacing
 * the last, over `trace_entries` allocator events; each cumemaudit_capture_hole adds one row of it, a Python
 * line ("model.py:40 (combine)") in one pool ("default", "graph (1, 1)"): its allocations in the window, their
 * bytes and the largest, and the bytes of the free blocks at the window's end that it last covered (the holes
 * it left) and in how many blocks. At most 32 rows are kept; the report names them (`capture_profile`). */
void cumemaudit_capture_profile(uint64_t trace_entries);
void cumemaudit_capture_hole(const char* line, const char* pool, uint64_t allocations, uint64_t allocated_bytes,
                             uint64_t largest_bytes, uint64_t hole_bytes, uint64_t hole_blocks);

/* PyTorch raised OutOfMemoryError for `requested_bytes` (its out-of-memory observer): the staged pools join
 * the report's latest `oom` record, and the report is written. */
void cumemaudit_torch_oom(uint64_t requested_bytes);

#ifdef __cplusplus
}
#endif

#endif
