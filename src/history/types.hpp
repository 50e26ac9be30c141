// types: the words of the history model — what happened to one process's memory over time, as the recorder
// keeps it: steps, alarms, graphs, contexts that ended, memory the driver took back, out-of-memory moments,
// pools, what enforce mode reclaimed. Ids and sites are still the ledger's (owners by id, stacks by trace);
// report::build names them. Pure C++: no CUDA, no I/O.
#pragma once

#include "history/forecast.hpp"
#include "ledger/types.hpp"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cumemaudit::history {

using KindBytes = std::array<std::uint64_t, static_cast<std::size_t>(ledger::Kind::count)>;

// One PyTorch pool as the Python helper described it (the default pool, or a graph pool).
struct TorchPool {
    std::string pool;
    std::uint64_t allocated_bytes = 0, reserved_bytes = 0;
    std::uint64_t free_blocks = 0, largest_free_block_bytes = 0;  // 0 and 0: not given
};

// Another framework's arena on the device, as its own statistics say (CuPy's default pool, JAX's allocator
// per device): bytes in use and bytes it holds.
struct Arena {
    std::string arena;  // "cupy", "jax:0", …
    std::uint64_t used_bytes = 0, reserved_bytes = 0;
};

// Another process's memory on the device, as NVML lists it: its pid and, where /proc shows it, its
// command name ("" in another pid namespace).
struct OtherProcess {
    std::uint32_t pid = 0;
    std::string name;
    std::uint64_t bytes = 0;
};
// The largest others an out-of-memory record names one by one; the rest are one part.
inline constexpr std::size_t kOtherProcessesKept = 8;

// What the driver said of the device at a moment (known = false: it could not say).
struct DeviceFigures {
    bool known = false;
    int device = -1;
    std::uint64_t used = 0, total = 0;
    std::uint64_t process_used = 0;                 // this process alone (NVML); 0: unknown
    std::uint64_t graph_used = 0, graph_reserved = 0;  // the device's graph memory
    std::uint64_t other_processes_bytes = 0;        // every other process's, as NVML listed them (0: not listed)
    // What the device's contexts reserve besides allocations (context_book.hpp): their fixed parts, measured
    // at creation (0: not measured), and their kernel stacks (limit × the threads the device holds).
    std::uint64_t context_bytes = 0, local_memory_bytes = 0;
    std::uint64_t stack_bytes_per_thread = 0;       // the largest stack limit among them
    std::uint64_t managed_resident_bytes = 0;       // this process's managed memory the device holds (0: none, or unknown)
    std::uint64_t module_code_bytes = 0;            // what the device holds of loaded modules' code and globals (ModulesLive)
    std::uint64_t malloc_heap_bytes = 0;            // the device heaps its contexts reserved (Context::malloc_heap_bytes)
};

// The modules and libraries the program loaded and has not unloaded (every device's: a library is loaded
// into no one context), the bytes of their images, and the device memory the driver took for their code and
// globals (every device's), measured around the calls that take it (module_book.hpp).
struct ModulesLive {
    std::uint64_t count = 0, image_bytes = 0;
    std::uint64_t code_bytes = 0;
};

// The loads of one site (the call that loaded them), as the module book keeps them.
struct ModuleSite {
    ledger::Site site;
    std::uint64_t loads = 0, unloads = 0;
    std::uint64_t live = 0, image_bytes = 0;  // live now, and their images' bytes
    std::uint64_t code_bytes = 0;             // the device memory measured for their code and globals, live now
    std::uint64_t peak_live = 0;
    std::uint64_t first_step = 0;
};
inline constexpr std::size_t kModuleSitesKept = 256;
// The site whose live modules grew most since the last mark, and by how many.
struct ModuleGrowth {
    ledger::Site site;
    std::uint64_t count = 0;
};

// What a mark brings besides the ledger: the program's step and label, PyTorch's figures, the driver's.
struct MarkInput {
    std::uint64_t step = 0;
    std::string label;  // "" for a numbered step; a phase, "SIGUSR2" or "sample"
    std::uint64_t time_ns = 0;
    std::uint64_t torch_allocated = 0, torch_reserved = 0;
    DeviceFigures driver;
    std::uint64_t pool_reserved = 0, pool_used = 0;  // stream-ordered pools of the mark's device
    std::vector<TorchPool> torch_pools;
    bool several_devices = false;
    ModulesLive modules;
    ModuleGrowth module_growth;
    std::vector<Arena> arenas;
};

struct Step {
    std::uint64_t step = 0, time_ns = 0;
    std::string label;
    std::map<ledger::OwnerId, std::uint64_t> live_by_owner;  // every owner known at the mark, 0 included
    KindBytes live_by_kind{};
    std::int64_t device = -1;
    DeviceFigures driver;
    std::uint64_t unattributed_bytes = 0;
    std::uint64_t torch_allocated = 0, torch_reserved = 0;
    std::vector<TorchPool> torch_pools;
    std::uint64_t pool_reserved = 0, pool_used = 0;
    std::uint64_t leaked_bytes = 0;
    std::map<ledger::OwnerId, std::uint64_t> leaked_by_owner;  // nonzero only
    std::uint64_t peak_tracked_bytes = 0;
    std::uint64_t held_unmapped_bytes = 0;  // VMM memory whose references are held, never mapped yet
    std::uint64_t dma_buf_pinned_bytes = 0;  // freed classic memory open dma-buf fds keep (the mark's device)
    ModulesLive modules;
    std::vector<Arena> arenas;  // as the helper staged them for this mark (a sample's: the last mark's)
    Forecast forecast;          // the device's, after this step (numbered steps with the driver's figures)
};

// A device's forecast as of its last numbered step, with what drives it: for a leak the owner whose leaked
// bytes are largest and the site that leaked most; for growth the owner whose live bytes grew most since the
// first step and the site that grew most since (named when a report or a warning asks).
struct DeviceForecast {
    std::int64_t device = -1;
    std::uint64_t step = 0;
    Forecast forecast;
    ledger::OwnerId owner = 0;
    bool owner_known = false;
    ledger::Site site;  // api "" when none
};

// Older steps folded: `marks` consecutive marks, of which `steps` keeps the first, lowest, highest and last.
struct StepWindow {
    std::uint64_t first_step = 0, last_step = 0, marks = 0;
    std::vector<Step> steps;
};

enum class AlarmKind : std::uint8_t { growth, leak, modules };
const char* to_string(AlarmKind);

// One alarm per kind, owner and site; repeats count.
struct Alarm {
    AlarmKind what = AlarmKind::growth;
    ledger::OwnerId owner = 0;
    std::uint64_t step = 0, time_ns = 0;  // first raised
    std::uint64_t bytes = 0;              // growth summed over every raise
    std::uint64_t live_bytes = 0;         // at the last raise
    std::uint64_t count = 1;
    std::uint64_t last_step = 0, last_time_ns = 0;
    ledger::Site site;                    // the site that grew most, when known
    std::uint64_t modules = 0, modules_live = 0;  // modules: the count's growth summed, and the count at the last raise
};

struct Graph {
    std::uint64_t id = 0, step = 0, time_ns = 0;
    std::uint64_t allocations = 0, bytes = 0;
    std::map<ledger::OwnerId, std::uint64_t> bytes_by_owner;
    std::uint64_t instantiations = 0;
    std::int64_t instantiate_cost_bytes = 0, held_instantiate_bytes = 0;
    std::uint64_t graph_memory_bytes = 0;
};

// A context ended and the driver freed what the program had not.
struct Teardown {
    const char* api = "";
    std::int64_t device = -1;
    std::uint64_t step = 0, time_ns = 0;
    std::uint64_t bytes = 0, allocations = 0;
    ledger::Site site;
    std::vector<ledger::LeakRow> freed;  // at most kTeardownRows
};
inline constexpr std::size_t kTeardownRows = 16;
inline constexpr std::size_t kTeardownsKept = 64;

// Memory the driver took back: a pool's idle memory or graph memory.
struct Return {
    std::string what, why, api;  // "pool" | "graph_memory"; "trim" | "destroy" | "refusal"; the call
    std::uint64_t pool = 0;      // what == "pool": its id
    std::int64_t device = -1;
    std::uint64_t step = 0, time_ns = 0, bytes = 0;
    ledger::Site site;
};
inline constexpr std::size_t kReturnsKept = 64;

struct Pool {
    std::uint64_t id = 0;
    std::string origin, location;  // "default" | "created" | "imported"; "device 0", "host", …
    std::int64_t device = -1;
    std::uint64_t reserved_bytes = 0, used_bytes = 0, idle_bytes = 0, peak_reserved_bytes = 0;
    std::uint64_t release_threshold = 0;
    bool destroyed = false;
    std::uint64_t step = 0;
    ledger::Site site;  // api "" when none
};
inline constexpr std::size_t kPoolsKept = 256;

// A context the program made, alive at the snapshot: what it reserves on its device besides allocations.
struct Context {
    std::int64_t device = -1;
    bool primary = false;
    bool measured = false;                  // its fixed part was measured at creation (NVML listed the process)
    std::uint64_t fixed_bytes = 0;          // its creation's cost less the stack reservation it began with
    std::uint64_t stack_bytes_per_thread = 0, local_memory_bytes = 0;  // at the snapshot
    std::uint64_t step = 0, time_ns = 0;    // made
    ledger::Site site;                      // the call that made it
    std::uint64_t stack_set_bytes_per_thread = 0;  // the last cuCtxSetLimit(STACK) through us (0: none)
    ledger::Site stack_set_site;
    bool green = false;      // a green context (cuGreenCtxCreate): no stack of its own
    bool destroyed = false;  // a green context destroyed, whose creation's cost the driver keeps
    // Its device heap: what the first launch of a kernel that calls malloc reserved beyond the kernel's code and
    // stack (the heap limit and 2 MiB, measured around that launch); 0 until one ran. And that launch's kernel
    // ("" when the driver cannot say) and site.
    std::uint64_t malloc_heap_bytes = 0;
    std::string malloc_heap_kernel;
    ledger::Site malloc_heap_site;
    // Its streams: how many the program made in it, what their creations took of device memory (measured
    // around each; the driver gives none back at a destroy), and the last creation that took some.
    std::uint64_t streams_created = 0, stream_bytes = 0;
    ledger::Site stream_site;
};
inline constexpr std::size_t kContextsKept = 64;

// One share of driver-used memory at an out-of-memory moment (they add up to it).
enum class PartKind : std::uint8_t {
    live, leaked, graph, async_pool_idle, graph_memory, other_process, unattributed, context, local_memory,
    dma_buf_pinned, managed_resident, held_unmapped, module_code, malloc_heap
};
const char* to_string(PartKind);
struct OomPart {
    PartKind what = PartKind::live;
    ledger::OwnerId owner = 0;  // live, leaked
    ledger::Kind kind = ledger::Kind::vmm_physical;  // live, leaked
    std::uint64_t graph = 0;    // graph: its id
    std::uint64_t bytes = 0;
    ledger::Site site;          // leaked: the call that created it; dma_buf_pinned: the fd's (api "" when none);
                                // managed_resident: the prefetch that moved the most of it there
    OtherProcess process;       // other_process: pid 0 for the smaller ones together
    std::uint64_t prefetched_bytes = 0;  // managed_resident: the bytes that site's prefetches moved there
};

struct Oom {
    std::uint64_t time_ns = 0, step = 0;
    std::string api, result;
    std::uint64_t requested_bytes = 0;
    std::string owner;  // the failing call's owner ("pytorch" when PyTorch raised alone)
    ledger::Site site;
    std::int64_t device = -1;
    std::uint64_t driver_free_bytes = 0, driver_total_bytes = 0, driver_used_bytes = 0;
    std::uint64_t leaked_bytes = 0, unattributed_bytes = 0;
    bool processes_listed = false;  // other processes were named: unattributed memory is this process's
    std::string kernel;             // a launch refused: the kernel's name ("" when the driver cannot say)
    std::int64_t kernel_local_bytes_per_thread = -1;  // and the local memory it needs per thread (-1: unknown)
    std::int64_t kernel_heap_bytes = -1;  // a launch refused for its device heap: the heap limit (-1: not that)
    ModulesLive modules;            // then
    std::vector<Arena> arenas;      // as of the last mark
    std::vector<OomPart> parts;  // largest first
    bool recovered = false;
    std::uint64_t recovered_time_ns = 0;
    std::vector<TorchPool> torch_pools;
};

// One row of a capture profile: a Python line's allocations in one pool over the window, and the free bytes
// at its end the line's allocations last covered (the holes it left).
struct CaptureHole {
    std::string line, pool;
    std::uint64_t allocations = 0, allocated_bytes = 0, largest_bytes = 0, hole_bytes = 0, hole_blocks = 0;
};
inline constexpr std::size_t kCaptureHolesKept = 32;

// References enforce mode released for the program, by the site that took them.
struct Reclaim {
    std::uint64_t bytes = 0, allocations = 0, references = 0;
    ledger::Site site;
    std::vector<ledger::HeldAllocation> members;
};

}  // namespace cumemaudit::history
