// types: the words the ledger and its parts share — ids, kinds, sites, leak classes, the rows a snapshot
// is made of. Its own header, so the ledger's parts include it and not the Ledger facade that includes them.
#pragma once

#include "ledger/python_frames.hpp"
#include "ledger/trace_tree.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace cumemaudit::ledger {

using OwnerId = std::uint16_t;
inline constexpr OwnerId kMaxOwners = 256;
// The owner the shim's owner rules give PyTorch's objects (torch's package, libc10, libtorch). The OOM
// observer books torch.OutOfMemoryError to it, the steps leave its growth to its own pools' figures and the
// capture budget fills its graph pools' free bytes first.
inline constexpr char kPyTorchOwner[] = "pytorch";

// What kind of memory an allocation is; the owners table splits live bytes by it.
// A multicast object holds no memory of its own (the memory bound to it does): its bytes are the size per
// device it was created with, never device memory.
// vmm_host: a cuMemCreate physical allocation located in host memory (NCCL's host buffers), never device
// memory.
// host_registered: the program's own host memory pinned by cuMemHostRegister, a range until unregistered.
// io_registered: another device's I/O memory (a network card's queue or doorbell, a PCI BAR) registered with
// CU_MEMHOSTREGISTER_IOMEMORY so kernels can write it: neither host nor device memory, a row of 0 bytes held
// until unregistered.
// async_pool_host: stream-ordered memory from a host-located pool (never device memory).
// graph: a graph's allocation (an allocation node, or cuMemAllocAsync captured). Its memory is the device's
// graph memory, committed at the graph's first launch and counted there (a step's graph_mem figures, an OOM
// record's graph_memory part), so never as an owner's device memory.
// array: a CUDA array or mipmapped array (cuArrayCreate and kin), device memory until destroyed or until its
// context ends. Its value is the array's handle, not an address.
// external: external memory (cuImportExternalMemory: a Vulkan allocation's, another process's), its bytes the
// exporter's, so never this device's memory, as an import's; a buffer mapped from it is a row of 0 bytes.
enum class Kind : std::uint8_t { vmm_physical, classic, async_pool, host_pinned, managed, imported, ipc, multicast, vmm_host,
                                 host_registered, async_pool_host, graph, array, external, io_registered, count };
const char* to_string(Kind);

// Where a physical allocation's bytes live, as its creation named it: a device, host memory, or a host
// NUMA node (id -1: the calling thread's current node). Unknown for what the call does not say.
struct Location {
    enum class Type : std::uint8_t { unknown, device, host, host_numa };
    Type type = Type::unknown;
    std::int32_t id = -1;
    friend auto operator<=>(const Location&, const Location&) = default;
    bool on_host() const { return type == Type::host || type == Type::host_numa; }
};
// "device 0", "host", "host NUMA 1", "host NUMA (current)"; empty when unknown.
std::string to_string(Location);

// Handle types of a physical allocation (as requested at creation / used at export or import).
// ipc: a legacy IPC handle (cuIpcGetMemHandle), which names classic device memory.
enum class HandleType : std::uint8_t { none, posix_fd, fabric, other, ipc };
const char* to_string(HandleType);

// Where a reference, allocation or misuse came from: the API, the interned stack and the owner.
struct Site {
    const char* api = "";  // static string naming the driver/runtime entry point, e.g. "cuMemCreate"
    TraceId trace = 0;     // 0: no stack captured
    OwnerId owner = 0;     // 0: "unknown"
    // Named, so a copy is two whole 8-byte moves: with the two bytes left as padding the compiler copies
    // bytes 0-7 and 6-13, and that second load straddles the two stores of a Site just returned in
    // registers, which the processor cannot forward (a stall on every recorded allocation).
    std::uint16_t unused = 0;
};
static_assert(sizeof(Site) == 16);

// A site the ledger asks for only when it keeps one. An unmap or address free keeps none unless it is
// misuse, and the caller's site may be a deep stack that costs microseconds to capture. Refers to `f`,
// which must outlive the call it is passed to.
class SiteOnDemand {
public:
    template <class F>
    SiteOnDemand(F& f) : get_([](void* p) { return Site((*static_cast<F*>(p))()); }), f_(&f) {}
    SiteOnDemand(const Site& site) : get_([](void* p) { return *static_cast<const Site*>(p); }), f_(const_cast<Site*>(&site)) {}
    Site operator()() const { return get_(f_); }

private:
    Site (*get_)(void*);
    void* f_;
};

// Identity of an exported shareable handle, so an import in this process finds the same allocation:
// fabric handle: two halves of a digest of the 64-byte blob; POSIX fd: st_dev and st_ino of the open file.
struct ExportKey {
    std::uint64_t a = 0, b = 0;
    friend bool operator==(const ExportKey&, const ExportKey&) = default;
};

enum class LeakClass : std::uint8_t { unreachable, open_export, mapped_at_exit, unfreed };
const char* to_string(LeakClass);

// When the snapshot is taken: a checkpoint sees mapped memory as in use; exit sees it as never torn down.
enum class Moment : std::uint8_t { checkpoint, exit };

// One allocation behind a leak row, so a report that suppresses some rows still counts each remaining
// allocation once. Filled for the classes the summary counts as leaked (unreachable, open-export).
struct HeldAllocation {
    std::uint64_t id = 0, bytes = 0;
};

// One row per (class, site of an unreleased reference / unfreed allocation), LSan-style.
struct LeakRow {
    LeakClass cls;
    Site site;
    std::uint64_t bytes = 0;        // sum of the sizes of the allocations this site still holds
    // The sizes of the allocations whose oldest outstanding reference (or, with none, the export or creation
    // that holds them) is this row's: summed over rows, each allocation once. A DeepEP buffer held by its
    // creation, a retain and an import is 3 × its size in `bytes` of three rows, once in `own_bytes`.
    std::uint64_t own_bytes = 0;
    std::uint32_t allocations = 0;  // how many allocations
    std::uint32_t references = 0;   // how many outstanding references taken at this site
    HandleType handle_type = HandleType::none;
    Kind kind = Kind::vmm_physical;
    Location location;                    // VMM rows: where the memory lives
    std::vector<HeldAllocation> members;  // unreachable / open-export rows only
};

struct MisuseRow {
    Site site;
    const char* result = "";  // the driver's answer, e.g. "CUDA_ERROR_INVALID_VALUE" ("CUDA_SUCCESS" allowed)
    std::string what;         // e.g. "release of a handle already released"
    std::uint64_t count = 0;
};

struct OwnerRow {
    OwnerId owner = 0;
    std::string name;
    std::uint64_t live_bytes = 0, peak_bytes = 0, leaked_bytes = 0;
    std::uint64_t live_by_kind[static_cast<int>(Kind::count)] = {};  // memory only: never Kind::multicast
    // Multicast objects' size per device: not memory (the bound memory is), so never in the live figures.
    std::uint64_t multicast_object_bytes = 0;
    // Snapshots only: the sites that hold most of live_bytes now, largest first, at most kOwnerLiveSites: what
    // explains a rank that holds more of this owner than its peers.
    std::vector<std::pair<Site, std::uint64_t>> live_sites{};
};

inline constexpr std::size_t kOwnerLiveSites = 4;

struct Summary {
    std::uint64_t leaked_bytes = 0;        // each leaked allocation counted once (unreachable + open-export)
    std::uint64_t leaked_allocations = 0;
    std::uint64_t leaked_references = 0;
    std::uint64_t misuse_events = 0;
    std::uint64_t unfreed_bytes = 0;       // classic allocations live at exit
    std::uint64_t unfreed_allocations = 0;
    std::uint64_t mapped_at_exit_bytes = 0;
    std::uint64_t live_bytes = 0;          // everything tracked and live now
    std::uint64_t peak_tracked_bytes = 0;
};

// One export or import still known to this process, so reports of several processes can be joined by key
// (an importer's unreleased reference pins the exporter's allocation).
struct ShareRow {
    ExportKey key;
    HandleType handle_type = HandleType::none;
    std::uint64_t bytes = 0;    // 0 when an import was never mapped (its size is learnt at the first map)
    bool released = false;      // no reference of this process is outstanding on the allocation
    bool mapped = false;        // imports: this process still maps it (in use, not leaked)
    Site site;                  // the export or import call
};

struct Snapshot {
    Summary summary;
    std::vector<LeakRow> leaks;      // sorted by bytes, largest first
    std::vector<MisuseRow> misuse;   // sorted by count, largest first
    std::vector<OwnerRow> owners;    // owners that ever held memory, largest live first
    std::vector<ShareRow> exports;   // what this process exported, still held (released = false) or not
    std::vector<ShareRow> imports;   // imports of other processes' allocations still held or mapped
};

// Asked at snapshot time whether an exported fd is still open (the shim checks the fd table; the ledger
// does no I/O). Gets the fd number and the key recorded at export.
using ExportProbe = std::function<bool(int fd, const ExportKey&)>;

// Memory that holds references with nothing mapped (Ledger::unreachable_in, still_unreachable): what
// enforce mode may release.
struct Unreachable {
    std::uint64_t id = 0;
    std::uint64_t bytes = 0;
    std::vector<std::uint64_t> handles;  // one per outstanding reference
    std::vector<Site> sites;             // parallel to the references, oldest first
};

// Kinds whose bytes live on the device and count in the driver's used memory.
inline bool counts_on_device(Kind k) {
    return k == Kind::vmm_physical || k == Kind::classic || k == Kind::async_pool || k == Kind::array;
}

// An owner's live bytes of the kinds that count on the device.
inline std::uint64_t live_on_device(const OwnerRow& o) {
    std::uint64_t sum = 0;
    for (int k = 0; k < static_cast<int>(Kind::count); ++k)
        if (counts_on_device(static_cast<Kind>(k))) sum += o.live_by_kind[k];
    return sum;
}

}  // namespace cumemaudit::ledger
