// report: the plain model of report v1 (docs/ARCHITECTURE.md, "Adding a report field"), its JSON form, and reading and writing
// report files. The shim writes reports and the CLI reads them; both go through this one model, so a field
// is named in exactly one place (report_json.cpp). Knows nothing of CUDA or of the ledger.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace cumemaudit::report {

inline constexpr const char* kSchema = "cumemaudit/report/v1";

struct Frame {
    std::uint64_t pc = 0;      // a return address, as captured
    std::uint64_t offset = 0;  // pc - load base of its object: stable across runs with ASLR
    std::string object;        // path of the shared object or executable; empty if unknown
    std::string symbol;        // demangled; empty if unknown
    std::string file;          // source file of pc - 1 (the call); empty without debug info
    std::uint32_t line = 0;
    std::string build_id;      // hex; empty if unknown
};

// A Python frame of the thread that made the call (addition to v1).
struct PythonFrame {
    std::string file;
    std::uint32_t line = 0;  // 0: no line for the instruction
    std::string function;    // qualified name, e.g. "Buffer.grow"
};

struct Site {
    std::string api;
    std::vector<Frame> frames;  // innermost first
    std::vector<PythonFrame> python_frames = {};  // addition to v1: innermost first; empty outside Python
    // Addition to v1: the index in python_frames of the frame a person names (common/user_frame.hpp, with
    // the option skip_frames); -1 without Python frames, or in a report from before the field.
    std::int64_t user_frame = -1;
};

struct Leak {
    std::string cls;          // "unreachable" | "open-export" | "mapped-at-exit" | "unfreed"
    std::uint64_t bytes = 0, allocations = 0, references = 0;
    // Addition to v1: the bytes of the allocations whose oldest reference is this row's (ledger LeakRow):
    // over rows, each allocation once, so views that add rows up add own_bytes.
    std::uint64_t own_bytes = 0;
    std::string handle_type;  // "fabric" | "posix_fd" | "none" | "other"
    std::string owner;
    std::string kind;         // ledger kind, e.g. "vmm_physical", "classic"
    Site site;
    std::string location;     // VMM rows: "device 0", "host", "host NUMA 1"; empty when not known
};

struct Misuse {
    std::string api, result, what;
    std::uint64_t count = 0;
    std::string owner;
    Site site;
};

// Where an owner's live memory sits: one site and its live bytes.
struct LiveSite {
    std::uint64_t bytes = 0;
    Site site;
};

struct Owner {
    std::string owner;
    std::uint64_t live_bytes = 0, peak_bytes = 0, leaked_bytes = 0;
    std::map<std::string, std::uint64_t> live_by_kind;  // kind ("vmm_physical", "classic", …) → live bytes
    std::map<std::string, std::uint64_t> live_by_device;  // a process on several devices: "0", "1", … → device bytes
    std::uint64_t multicast_object_bytes = 0;  // its multicast objects' size per device: not memory, not in live_bytes
    // addition to v1: the sites that held most of live_bytes when written, largest first (at most 4)
    std::vector<LiveSite> live_sites;
};

// One PyTorch memory pool as its caching allocator sees it (the default pool, or one CUDA graph pool), from
// the Python helper: torch.cuda.memory_snapshot() segments summed by pool.
struct TorchPool {
    std::string pool;                      // "default", or "graph (1, 3)" (PyTorch's pool id)
    std::uint64_t allocated_bytes = 0;     // in live tensors
    std::uint64_t reserved_bytes = 0;      // segments cudaMalloc'ed by the pool
    std::uint64_t fragmentation_bytes = 0; // reserved but not allocated
    // additions to v1: the free blocks fragmentation_bytes is split among, and the largest (0: not given)
    std::uint64_t free_blocks = 0, largest_free_block_bytes = 0;
};

// Another framework's arena on the device as its own statistics say (CuPy's default pool, JAX's allocator
// per device), from the Python helper at a step: the arena's bytes are one allocation (or a few) in the
// owners' figures; this says how much of it is in use.
struct Arena {
    std::string arena;                 // "cupy", "jax:0" (JAX's device id)
    std::uint64_t used_bytes = 0;      // in use by the framework's arrays
    std::uint64_t reserved_bytes = 0;  // what the arena holds
};

// One mark on the timeline: a training step, a named phase, a SIGUSR2 or a periodic sample.
struct Step {
    std::uint64_t step = 0, time_ns = 0;
    std::map<std::string, std::uint64_t> by_owner;  // live bytes per owner at the mark
    std::uint64_t driver_used_bytes = 0, unattributed_bytes = 0;
    // additions to v1
    std::string label;                               // "" for a numbered step; a phase name or "sample"
    std::map<std::string, std::uint64_t> by_kind;    // live bytes per kind at the mark
    std::uint64_t driver_total_bytes = 0;            // cuMemGetInfo total (0: not sampled)
    std::uint64_t process_used_bytes = 0;            // NVML's figure for this process alone (0: unknown)
    std::uint64_t pytorch_allocated_bytes = 0;       // from cumemaudit.torch_step (0: not given)
    std::uint64_t pytorch_reserved_bytes = 0;
    std::uint64_t graph_mem_used_bytes = 0;          // cuDeviceGetGraphMemAttribute, used / reserved high
    std::uint64_t graph_mem_reserved_bytes = 0;
    std::uint64_t async_pool_reserved_bytes = 0;     // stream-ordered pools of the mark's device, as the
    std::uint64_t async_pool_used_bytes = 0;         // driver says (idle: reserved - used)
    std::vector<TorchPool> pytorch_pools;             // from cumemaudit.torch_step under PyTorch (empty otherwise)
    // The device whose driver figures these are (-1: not known). A process on several devices counts only
    // that device's memory against them (unattributed); by_owner and by_kind stay every device's.
    std::int64_t device = -1;
    // Leaked so far: unreachable VMM memory at the mark (as the exit's leaked bytes count it, but for dma-buf
    // fds, which are looked at when a report is written), in all and by the owner that created it.
    std::uint64_t leaked_bytes = 0;
    std::map<std::string, std::uint64_t> leaked_by_owner;
    // The highest tracked bytes (every owner) since the previous mark, this one included: a peak that came
    // and went between two marks, which the marks' own figures never show. 0: not recorded.
    std::uint64_t peak_tracked_bytes = 0;
    // Every other process's memory on the device, as NVML listed it; counted against driver-used memory, so
    // unattributed_bytes is this process's alone. 0 also when NVML could not list them.
    std::uint64_t other_processes_bytes = 0;
    // VMM memory whose references are held and that was never mapped yet (a handle made ahead of its map): no
    // leak at a mark, since the program may map or release it later; a leak at exit if still held.
    std::uint64_t held_unmapped_bytes = 0;
    std::uint64_t dma_buf_pinned_bytes = 0;  // freed classic memory open dma-buf fds keep
    std::uint64_t managed_resident_bytes = 0;  // this process's managed memory the device holds
    // The device memory the driver took for loaded modules' code and globals, measured at the calls that took
    // it (module loads, a kernel's function first got in a context).
    std::uint64_t module_code_bytes = 0;
    // The modules and libraries loaded and not unloaded (every device's), and their images' bytes: not device
    // bytes (what their code costs on the device is part of unattributed_bytes).
    std::uint64_t modules_live = 0, module_image_bytes = 0;
    std::vector<Arena> arenas;  // staged by the helper for this mark (a sample repeats the last mark's)
    // The device's forecast after this step (docs/FORECAST.md): "" on a labelled mark or sample; the out-of-
    // memory step, its 90% bounds and the seconds to it are null unless the trend is "leak" or "growing".
    std::string forecast_trend;
    std::optional<std::uint64_t> forecast_oom_step, forecast_oom_step_low, forecast_oom_step_high, forecast_oom_in_s;
    // What the device's contexts reserve besides allocations, named against driver-used memory: their fixed
    // parts as measured at their creation (0 where NVML could not say), and their kernel stacks (each
    // context's stack limit × the threads the device holds), with the largest stack limit per thread.
    std::uint64_t context_bytes = 0, local_memory_bytes = 0, stack_bytes_per_thread = 0;
    // The device heaps the contexts reserved (a kernel that calls malloc reserves its context's at its first
    // launch: the heap limit and 2 MiB), measured at the launch that reserved each.
    std::uint64_t malloc_heap_bytes = 0;
};

// Older marks of a long job, folded (history/step_history.hpp): `marks` consecutive marks from first_step to
// last_step, of which `steps` keeps whole the first, the last, the lowest and the highest, in marking order.
struct StepWindow {
    std::uint64_t first_step = 0, last_step = 0, marks = 0;
    std::vector<Step> steps;
};

// Memory outside PyTorch grew past growth_alarm over one step (or unreachable VMM memory grew). One alarm per
// kind, owner and site: a slow leak that grows at step after step is one alarm with a count, its first step
// (`step`) and its last.
struct Alarm {
    std::uint64_t step = 0, time_ns = 0;  // the first time it was raised
    std::string what;        // "growth" | "leak"
    std::string owner;
    std::uint64_t bytes = 0;      // growth over the steps it was raised at, summed
    std::uint64_t live_bytes = 0; // the owner's live bytes (for a leak: unreachable bytes) at the last
    Site site;                    // the site that grew most, when known
    // additions to v1
    std::uint64_t count = 1;      // times raised
    std::uint64_t last_step = 0, last_time_ns = 0;
    // "modules": bytes and live_bytes are images' bytes; these are the count's growth, summed, and the
    // modules live at the last raise
    std::uint64_t modules = 0, modules_live = 0;
};

// What enforce mode released for the program: references nothing could release any more, by the site
// that took them (one row a site, as the audit's leak rows; an allocation held from two sites is in both).
struct Reclaim {
    std::uint64_t bytes = 0, allocations = 0, references = 0;
    Site site;
};

// A CUDA graph: what was allocated while its stream captured (or by its allocation nodes), what instantiating
// it cost, and the graph memory its launch committed.
struct Graph {
    std::uint64_t id = 0;                            // order of capture, from 1
    std::uint64_t step = 0;                          // the last step marked before capture began
    std::uint64_t allocations = 0, bytes = 0;        // allocated during capture
    std::map<std::string, std::uint64_t> bytes_by_owner;
    std::uint64_t instantiations = 0;
    std::int64_t instantiate_cost_bytes = 0;         // driver-used delta across cuGraphInstantiate
    std::int64_t held_instantiate_bytes = 0;         // of that, what executables not yet destroyed hold
    std::uint64_t time_ns = 0;                       // when its capture began (0: unknown)
    std::uint64_t graph_memory_bytes = 0;            // graph memory its first upload or launch committed
};

// A context ended (cudaDeviceReset, cuDevicePrimaryCtxReset, the last cuDevicePrimaryCtxRelease, cuCtxDestroy)
// and the driver freed the classic allocations it owned: they leave the ledger here, never as held at exit.
// `freed` rows are the allocations the program had not freed, by the site that made them (class "unfreed").
struct Teardown {
    std::string api;           // the call that ended the context
    std::int64_t device = -1;  // -1: not known (cuCtxDestroy)
    std::uint64_t step = 0;    // the last step marked before it
    std::uint64_t time_ns = 0;
    std::uint64_t bytes = 0, allocations = 0;  // what the driver freed
    Site site;                                 // the call
    std::vector<Leak> freed;                   // largest first, at most kTeardownRows
};
inline constexpr std::size_t kTeardownRows = 16;

// CU_LIMIT_STACK_SIZE of a new context (docs/DRIVER.md): a stack above it was raised by the program.
inline constexpr std::uint64_t kDefaultStackBytesPerThread = 1024;

// A context alive when the report was written, and what it reserves on its device besides allocations.
struct Context {
    std::int64_t device = -1;
    bool primary = false;             // the device's primary context (cudart's), or one cuCtxCreate made
    bool measured = false;            // fixed_bytes was measured at its creation (NVML listed this process)
    std::uint64_t fixed_bytes = 0;    // what its creation cost, less the kernel stack it began with
    std::uint64_t stack_bytes_per_thread = 0;   // CU_LIMIT_STACK_SIZE at the last mark or out-of-memory moment
    std::uint64_t local_memory_bytes = 0;       // the stack reservation then: that × the threads the device holds
    std::uint64_t step = 0, time_ns = 0;        // made
    Site site;                                  // the call that made it
    std::uint64_t stack_set_bytes_per_thread = 0;  // the last cuCtxSetLimit(STACK) (0: none through the audit)
    Site stack_set_site;
    bool green = false;      // a green context (cuGreenCtxCreate): its fixed_bytes are its creation's whole cost
    bool destroyed = false;  // a green context destroyed: the driver keeps what its creation took
    std::uint64_t malloc_heap_bytes = 0;  // its device heap, measured at the launch that reserved it (0: none yet)
    std::string malloc_heap_kernel;       // that launch's kernel ("" when the driver could not say)
    Site malloc_heap_site;                // and its site
    std::uint64_t streams_created = 0;    // streams the program made in it
    std::uint64_t stream_bytes = 0;       // what their creations took (in fixed_bytes' part; never given back)
    Site stream_site;                     // the last creation that took some
};
inline constexpr std::size_t kTeardownsKept = 64;  // the summary counts every one

// A device's forecast as of its last numbered step (docs/FORECAST.md), with the owner and site that drive it.
struct Forecast {
    std::int64_t device = -1;
    std::uint64_t step = 0;  // the step it was made at
    std::string trend;       // "unknown" | "flat" | "converging" | "growing" | "leak"
    std::optional<std::uint64_t> oom_step, oom_step_low, oom_step_high, oom_in_s;
    std::uint64_t rate_bytes_per_step = 0;  // the running peak's growth
    std::string owner;                      // "" when none drives it
    Site site;                              // api "" when none
};

// The modules and libraries one call site loaded (cuModuleLoad*, cuLibraryLoad*): how many, how many are
// live, and the bytes of the live ones' images (not device bytes: the driver says nothing of what their code
// costs there).
// One row of a capture profile (Python: cumemaudit.capture_profile): a Python line's allocations in one pool
// over the window, and the free bytes at its end they last covered.
struct CaptureHole {
    std::string line, pool;
    std::uint64_t allocations = 0, allocated_bytes = 0, largest_bytes = 0, hole_bytes = 0, hole_blocks = 0;
};

struct ModuleSite {
    std::string owner;
    Site site;
    std::uint64_t loads = 0, unloads = 0, live = 0, image_bytes = 0, peak_live = 0;
    std::uint64_t first_step = 0;
    std::uint64_t code_bytes = 0;  // the device memory measured for the live ones' code and globals
};

// A stream-ordered pool: a device's default pool or one the program created, as the driver described it at
// the last look (a mark, an out-of-memory moment, the report). Its idle bytes (reserved, used by no
// allocation) are device memory the driver gives back at a synchronisation past the release threshold, at a
// trim, and before it refuses memory; until then they are in no owner's figures.
struct Pool {
    std::uint64_t id = 0;          // order first seen, from 1
    std::string origin;            // "default" | "created" | "imported" (another process's, by its fd)
    std::string location;          // "device 0", "host", "host NUMA 0"
    std::int64_t device = -1;      // -1: host-located, charged to no device
    std::uint64_t reserved_bytes = 0, used_bytes = 0, idle_bytes = 0;
    std::uint64_t peak_reserved_bytes = 0;  // the driver's high-water mark
    std::uint64_t release_threshold = 0;    // idle bytes it keeps at a synchronisation
    bool destroyed = false;
    std::uint64_t step = 0;        // the last step marked before it was first seen
    Site site;                     // created: the cuMemPoolCreate call; imported: the import
};
inline constexpr std::size_t kPoolsKept = 256;  // pools beyond are counted in summary.untracked_pools

// Memory the driver took back on its own or at the program's word: a pool's idle memory (a trim, a
// destroy, before it refused an allocation) or graph memory (cuDeviceGraphMemTrim).
struct MemoryReturn {
    std::string what;          // "pool" | "graph_memory"
    std::string why;           // "trim" | "destroy" | "refusal"
    std::string api;           // the call: cuMemPoolTrimTo, cuMemPoolDestroy, cuDeviceGraphMemTrim, or the refused one
    std::uint64_t pool = 0;    // what == "pool": its id in `pools`
    std::int64_t device = -1;
    std::uint64_t step = 0, time_ns = 0, bytes = 0;
    Site site;                 // the call
};
inline constexpr std::size_t kReturnsKept = 64;  // the summary counts every one

// One share of driver-used memory at an out-of-memory moment. The parts of one Oom add up to its
// driver_used_bytes exactly: live memory per owner and kind (less what is leaked), leaked (unreachable) VMM
// memory per site that created it, each graph's instantiate cost, idle async-pool memory, graph memory, and
// the rest.
struct OomPart {
    std::string what;        // "live" | "leaked" | "graph" | "async_pool_idle" | "graph_memory" | "other_process"
                             // | "unattributed" | "context" | "local_memory" | "dma_buf_pinned" | "managed_resident" | "module_code"
                             // | "malloc_heap"
    std::string owner;       // live, leaked, dma_buf_pinned (the fd call's owner)
    std::string kind;        // live, leaked, dma_buf_pinned: the ledger kind, e.g. "vmm_physical"
    std::uint64_t graph = 0; // graph: its id in `graphs`
    std::uint64_t bytes = 0;
    Site site;               // leaked: the call that created the memory; dma_buf_pinned: the call that made the fd;
                             // managed_resident: the prefetch that moved the most of it onto the device
    // additions to v1: other_process: its pid (0 for the smaller ones together) and its command name as /proc
    // shows it ("" when it does not)
    std::int64_t pid = 0;
    std::string process;
    // managed_resident: the bytes of live managed memory that `site` (a prefetch) moved onto the device; a
    // kernel's touches have no call to name
    std::uint64_t prefetched_bytes = 0;
};

// A wrapped allocation entry point answered CUDA_ERROR_OUT_OF_MEMORY: the request, who held the device at
// that instant, and whether a later retry of the same request succeeded.
struct Oom {
    std::uint64_t time_ns = 0, step = 0;
    std::string api;                       // e.g. "cuMemCreate", or "torch" when PyTorch raised alone
    std::string result;                    // the driver's answer, "CUDA_ERROR_OUT_OF_MEMORY"
    std::uint64_t requested_bytes = 0;     // 0 where the call names no size (graph instantiate)
    std::string owner;                     // owner of the failing call's site
    Site site;
    std::uint64_t driver_free_bytes = 0, driver_total_bytes = 0, driver_used_bytes = 0;
    std::uint64_t leaked_bytes = 0;        // unreachable VMM memory at that instant
    std::uint64_t unattributed_bytes = 0;
    std::vector<OomPart> parts;            // largest first; their bytes sum to driver_used_bytes
    bool recovered = false;                // a later call of the same API for the same size succeeded
    std::int64_t device = -1;              // the refusing device (its context's; -1: not known)
    std::uint64_t recovered_time_ns = 0;
    std::vector<TorchPool> pytorch_pools;  // PyTorch's view at its OutOfMemoryError (the helper's observer)
    // Addition to v1: NVML listed the device's processes, so other processes are parts of their own and
    // unattributed memory is this process's (its context, modules, kernel stacks).
    bool processes_listed = false;
    // A launch refused (its kernel's stack could not grow): the kernel and its local memory per thread.
    std::string kernel;                                             // "": not a launch, or not known
    std::optional<std::uint64_t> kernel_local_bytes_per_thread;     // absent: not a launch, or not known
    std::optional<std::uint64_t> kernel_heap_bytes;                 // absent: not a launch refused for its heap
    std::uint64_t modules_live = 0, module_image_bytes = 0;         // as a step's
    std::vector<Arena> arenas;                                      // as of the last mark
};

// A shareable handle this process exported, or imported from another process. `key` is the same text in
// the exporter's and the importer's report (fabric: digest of the blob; POSIX fd: st_dev:st_ino of the open
// file, which a Unix socket passes unchanged), so reports of a job can be joined on it.
struct Export {
    std::string key;
    std::string handle_type;
    std::uint64_t bytes = 0;
    Site site;
    std::int64_t exporter_pid = 0;
    bool released = false;  // the exporter holds no reference any more; a peer's import may still pin it
};

struct Import {
    std::string key;
    std::string handle_type;
    std::uint64_t bytes = 0;
    bool released = false;  // false: this process still holds a reference, which pins the exporter's memory
    bool mapped = false;    // still mapped here: in use; unreleased and unmapped, it is a leak of this process
    Site site;
};

struct ProcessInfo {
    std::int64_t pid = 0;
    std::int64_t rank = -1;  // -1: not part of a distributed job
    std::int64_t world_size = 0;
    std::string host;
    std::vector<std::string> argv;
    std::optional<int> exit_code;  // absent (null) in a checkpoint written while the process runs
    std::int64_t local_rank = -1;  // addition to v1; -1: not given by the launcher
    // Addition to v1: the program an exec replaced this image with (the process went on as that program,
    // whose report is another file); empty when the image ended otherwise, or has not ended.
    std::string replaced_by_exec;
    // Addition to v1: the signal ("SIGTERM", "SIGINT") whose default disposition ended the process right
    // after this report was written (a checkpoint then); empty otherwise.
    std::string signal;
};

struct DriverInfo {
    std::int64_t version = 0;
    bool simulated = false;
};

struct Summary {
    std::uint64_t leaked_bytes = 0, leaked_allocations = 0, leaked_references = 0;
    std::uint64_t misuse_events = 0;
    std::uint64_t unfreed_bytes = 0;
    std::uint64_t peak_tracked_bytes = 0;
    std::uint64_t intercepted_calls = 0;
    // additions to v1
    std::uint64_t unfreed_allocations = 0, mapped_at_exit_bytes = 0, live_bytes = 0;
    std::uint64_t suppressed_leaks = 0, suppressed_misuse = 0;  // rows removed by suppression rules
    std::uint64_t reclaimed_bytes = 0;                          // released by mode=enforce
    std::uint64_t oom_events = 0;                               // refused allocations, also those past `oom` rows kept
    std::uint64_t reclaimed_allocations = 0, reclaimed_references = 0;
    // Multicast objects whose references are never released: leaks, counted apart from leaked_bytes and
    // leaked_allocations because they hold no memory of their own (their rows' bytes are their size).
    std::uint64_t leaked_multicast_objects = 0;
    // Classic allocations the driver freed when their context ended, which the program had not freed.
    std::uint64_t teardown_freed_bytes = 0, teardown_freed_allocations = 0;
    // Device memory stream-ordered pools held idle at the last look, and all the driver took back (returns).
    std::uint64_t pool_idle_bytes = 0, returned_bytes = 0;
    std::uint64_t untracked_pools = 0;  // pools past kPoolsKept
    std::uint64_t alarms_dropped = 0;   // alarms of new sites past max_alarms
    std::uint64_t steps_marked = 0;     // every mark made: the recent ones in `steps`, older ones in `step_history`
};

struct SuppressionUse {
    std::string rule;  // as written in the file, e.g. "leak:*ncclMemAlloc*"
    std::uint64_t hits = 0;
};

struct Report {
    std::string schema = kSchema;
    ProcessInfo process;
    DriverInfo driver;
    Summary summary;
    std::vector<Leak> leaks;
    std::vector<Misuse> misuse;
    std::vector<Owner> owners;
    std::vector<Step> steps;            // the most recent marks (steps_kept of them), whole
    // additions to v1
    std::vector<StepWindow> step_history;  // the older marks, in at most step_windows windows
    std::vector<SuppressionUse> suppressions;
    std::vector<Alarm> alarms;
    std::vector<Graph> graphs;
    std::vector<Reclaim> reclaimed;
    std::map<std::string, std::string> options;  // the options in effect, echoed
    std::vector<Export> exports;
    std::vector<Import> imports;
    std::vector<Oom> oom;                        // out-of-memory moments, oldest first
    std::vector<Teardown> teardowns;             // contexts that ended, oldest first (the first kTeardownsKept)
    std::vector<Pool> pools;                     // stream-ordered pools, in the order first seen
    std::vector<MemoryReturn> returns;           // memory the driver took back, oldest first (the first kReturnsKept)
    std::vector<Context> contexts;               // alive when written
    std::vector<ModuleSite> modules;             // module and library loads by site
    std::vector<Forecast> forecasts;             // one per device marked
    std::vector<CaptureHole> capture_profile;    // the last capture profile's rows, the most free first
    std::uint64_t capture_trace_entries = 0;     // the allocator events it read
    bool checkpoint = false;                     // written while running, not at exit
    std::uint64_t time_ns = 0;                   // CLOCK_REALTIME when written
};

// A report file that cannot be used; what() names the file and the problem.
class ReportError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

nlohmann::json to_json(const Report&);
nlohmann::json to_json(const Site&);  // a site as report rows carry it (the C API's leak sites)
Report from_json(const nlohmann::json&);  // throws ReportError naming the field, e.g. "missing field 'summary.leaked_bytes'"

std::string to_string(const Report&);  // pretty-printed JSON text

// <dir>/cumemaudit.<host>.<pid>[.r<rank>].json (docs/RANKS.md's naming); rank < 0 leaves the rank out. The host name
// is the kernel's, settable by anyone with a container: every byte but [A-Za-z0-9._-] becomes '_', so it
// can never name a directory ("x/../../escaped" stays one file name inside dir).
std::string report_path(const std::string& dir, const std::string& host, std::int64_t pid, std::int64_t rank);

// report_dir with %h (host), %p (pid), %r (rank, or "norank" outside a job) and %% expanded, so ranks of
// a job on a shared file system can write side by side; any other %x is kept as written.
std::string expand_report_dir(const std::string& dir, const std::string& host, std::int64_t pid, std::int64_t rank);

Report load(const std::string& path);  // throws ReportError "<path>: <problem>"

// The text of a report file, checked before any parser sees it: a regular file (a FIFO would block), of
// bounded size, nested at most 128 levels (deeper overflowed the stack). Throws ReportError naming path.
std::string read_report_text(const std::string& path);
// Throws ReportError when world_size or rank is above 2^20 (more ranks than any job: a corrupt or hostile
// file). Every loader of process and job reports checks with it.
void check_ranks(std::int64_t world_size, std::int64_t rank);

// Writes through a temp file in the destination's directory (a random name, O_EXCL|O_NOFOLLOW, tried
// again on a clash), fsync, then rename, so a reader sees the old report or the new one, never a part. A
// symlink at the destination is replaced, never followed. `mode` is the file's mode (0600: argv may hold
// secrets). Returns an empty string on success, else what went wrong; never throws, never leaves the
// temp behind.
std::string write_atomic(const std::string& path, const Report&, unsigned mode = 0600) noexcept;
// The same, but only where nothing is at `path` yet: the complete file takes the name (link, never rename),
// so a process killed at any moment leaves a whole report under it or none, never an empty claim. Sets
// *taken, and writes nothing, when something is there already.
std::string write_new(const std::string& path, const Report&, unsigned mode, bool* taken) noexcept;

// Why `dir` is not a safe place for reports, or "": a directory group or others may write to, unless it is
// sticky and root's or this user's (anyone else could swap the report out for their own).
std::string unsafe_report_dir(const std::string& dir);
// Makes `dir` and its missing parents, each 0755 less the umask; "" or what failed, with the path.
std::string make_report_dir(const std::string& dir);

}  // namespace cumemaudit::report
