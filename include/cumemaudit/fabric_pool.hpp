// fabric_pool: a leak-free allocator for fabric / POSIX-fd (VMM) device memory, by construction.
//
// Why it exists: VMM allocators (DeepEP/HybridEP, NVSHMEM, NCCL's cuMem path) keep physical memory alive
// through handle references that nothing else counts; one forgotten cuMemRelease per buffer growth leaked
// tens of GiB per rank (DeepEP issue 799; docs/DRIVER.md). Here every driver resource is owned by exactly
// one move-only object that releases it exactly once, so forgetting is not possible, and FabricPool grows
// a buffer in place (one large address reservation, more chunks mapped at its end) instead of releasing
// and re-allocating it, so a new tokens-per-rank high costs only the new bytes.
//
// Ownership, in one place:
//   PhysicalChunk  one cuMemCreate reference            -> cuMemRelease once
//   ImportedHandle one cuMemImportFromShareableHandle reference -> cuMemRelease once
//   ExportedHandle a POSIX fd (closed once) or a 64-byte fabric blob (nothing to close)
//   Reservation    one cuMemAddressReserve range         -> cuMemAddressFree once
//   Mapping        one cuMemMap (+ cuMemSetAccess)       -> cuMemUnmap once
// A Mapping does not own its chunk or its reservation: it borrows both by const reference. The driver
// keeps mapped memory alive until the unmap even if the chunk is released first, so either order frees
// everything; but the reservation must outlive its mappings (cuMemAddressFree of a mapped range fails),
// so owners declare the Reservation before the Mappings (members are destroyed in reverse order).
//
// Errors: factories throw PoolError (CUresult + API name). Destructors never throw: a failed release is
// counted (release_error_count()) and passed to the handler set with set_release_error_handler().
#pragma once

#include <cuda.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace cumemaudit::pool {

// ---------------------------------------------------------------- errors

class PoolError : public std::runtime_error {
public:
    PoolError(CUresult result, const char* api);
    CUresult result() const noexcept { return result_; }
    const char* api() const noexcept { return api_; }  // a string literal: the driver entry point

private:
    CUresult result_;
    const char* api_;
};

// Called from destructors when a release fails (it must not throw). nullptr restores the default, which
// only counts. Process-wide, because the objects that fail may outlive whoever created them.
using ReleaseErrorHandler = void (*)(CUresult result, const char* api) noexcept;
void set_release_error_handler(ReleaseErrorHandler handler) noexcept;
std::uint64_t release_error_count() noexcept;

// ---------------------------------------------------------------- driver call accounting

// Every driver entry point this library calls, so the benchmark and the tests can say how many calls a
// pattern costs.
enum class Api : std::uint8_t {
    granularity, create, release, address_reserve, address_free, map, unmap, set_access, export_handle,
    import_handle, count_
};
inline constexpr std::size_t kApiCount = static_cast<std::size_t>(Api::count_);
const char* api_name(Api api) noexcept;  // "cuMemCreate", ...

struct CallCounts {
    std::array<std::uint64_t, kApiCount> n{};
    std::uint64_t operator[](Api a) const noexcept { return n[static_cast<std::size_t>(a)]; }
    std::uint64_t total() const noexcept;
    CallCounts operator-(const CallCounts& earlier) const noexcept;
};

// A set of counters one owner (a pool, a benchmark) wants its calls added to; every call is also added
// to the process-wide counters (global_call_counts()). Thread-safe.
class CallCounter {
public:
    void add(Api a) noexcept { n_[static_cast<std::size_t>(a)].fetch_add(1, std::memory_order_relaxed); }
    CallCounts snapshot() const noexcept;

private:
    std::array<std::atomic<std::uint64_t>, kApiCount> n_{};
};
CallCounts global_call_counts() noexcept;

// ---------------------------------------------------------------- resources

enum class HandleKind : std::uint8_t { fabric, posix_fd };
CUmemAllocationHandleType to_cu(HandleKind kind) noexcept;

// The recommended granularity for (device, kind): sizes and offsets must be multiples of it.
[[nodiscard]] std::size_t granularity(int device, HandleKind kind, CallCounter* counter = nullptr);

class ExportedHandle;
class Mapping;

// One reference on a physical allocation, taken by cuMemCreate or by an import. Shared code of
// PhysicalChunk and ImportedHandle; not usable alone (protected constructors).
class AllocationRef {
public:
    AllocationRef(const AllocationRef&) = delete;
    AllocationRef& operator=(const AllocationRef&) = delete;

    explicit operator bool() const noexcept { return handle_ != 0; }
    std::size_t size() const noexcept { return size_; }
    int device() const noexcept { return device_; }
    HandleKind kind() const noexcept { return kind_; }
    // The driver's value, for interoperation and tests only: this object keeps the reference; never
    // release the value yourself.
    CUmemGenericAllocationHandle raw() const noexcept { return handle_; }
    void reset() noexcept;  // releases the reference now

protected:
    AllocationRef() noexcept = default;
    AllocationRef(CUmemGenericAllocationHandle h, std::size_t size, int device, HandleKind kind,
                  CallCounter* counter) noexcept
        : handle_(h), size_(size), device_(device), kind_(kind), counter_(counter) {}
    AllocationRef(AllocationRef&& other) noexcept;
    AllocationRef& operator=(AllocationRef&& other) noexcept;
    ~AllocationRef();

    CUmemGenericAllocationHandle handle_ = 0;
    std::size_t size_ = 0;
    int device_ = 0;
    HandleKind kind_ = HandleKind::fabric;
    CallCounter* counter_ = nullptr;
};

// The creation reference of one cuMemCreate allocation.
class PhysicalChunk : public AllocationRef {
public:
    PhysicalChunk() noexcept = default;  // empty
    PhysicalChunk(PhysicalChunk&&) noexcept = default;
    PhysicalChunk& operator=(PhysicalChunk&&) noexcept = default;
    ~PhysicalChunk() = default;

    // `bytes` must be a multiple of granularity(device, kind).
    [[nodiscard]] static PhysicalChunk create(int device, std::size_t bytes, HandleKind kind,
                                              CallCounter* counter = nullptr);
    // A shareable handle of this chunk's kind. Takes no reference (the driver's export does not); a POSIX
    // fd pins the memory until closed, which the ExportedHandle does when destroyed.
    [[nodiscard]] ExportedHandle export_handle() const;

private:
    using AllocationRef::AllocationRef;
};

// A shareable handle: what one process sends another so it can import the memory.
class ExportedHandle {
public:
    ExportedHandle() noexcept = default;
    ExportedHandle(ExportedHandle&& other) noexcept;
    ExportedHandle& operator=(ExportedHandle&& other) noexcept;
    ExportedHandle(const ExportedHandle&) = delete;
    ExportedHandle& operator=(const ExportedHandle&) = delete;
    ~ExportedHandle();

    // What a receiving process builds from the bytes or the fd it got (an fd over SCM_RIGHTS): the fd is
    // owned from then on. `bytes` is the exporter's chunk size, which import cannot learn by itself.
    [[nodiscard]] static ExportedHandle adopt_fd(int fd, std::size_t bytes, int device);
    [[nodiscard]] static ExportedHandle from_fabric(const CUmemFabricHandle& blob, std::size_t bytes, int device);

    explicit operator bool() const noexcept { return valid_; }
    HandleKind kind() const noexcept { return kind_; }
    std::size_t size() const noexcept { return size_; }
    int device() const noexcept { return device_; }
    int fd() const noexcept { return fd_; }  // -1 unless posix_fd; still owned by this object
    const CUmemFabricHandle& fabric() const noexcept { return fabric_; }
    // Gives the fd away (to a socket send, say): this object forgets it and will not close it.
    [[nodiscard]] int release_fd() noexcept;
    void reset() noexcept;  // closes the fd now

private:
    friend class PhysicalChunk;
    friend class ImportedHandle;
    void* os_handle() const noexcept;  // the argument cuMemImportFromShareableHandle takes

    bool valid_ = false;
    HandleKind kind_ = HandleKind::fabric;
    std::size_t size_ = 0;
    int device_ = 0;
    int fd_ = -1;
    CUmemFabricHandle fabric_{};
};

// The reference cuMemImportFromShareableHandle gives (a new handle value, even in the exporting process).
class ImportedHandle : public AllocationRef {
public:
    ImportedHandle() noexcept = default;
    ImportedHandle(ImportedHandle&&) noexcept = default;
    ImportedHandle& operator=(ImportedHandle&&) noexcept = default;
    ~ImportedHandle() = default;

    // The shareable handle is only read; a POSIX fd stays open and owned by `from`.
    [[nodiscard]] static ImportedHandle open(const ExportedHandle& from, CallCounter* counter = nullptr);

private:
    using AllocationRef::AllocationRef;
};

// A range of device address space.
class Reservation {
public:
    Reservation() noexcept = default;
    Reservation(Reservation&& other) noexcept;
    Reservation& operator=(Reservation&& other) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation();

    // `bytes` a multiple of the granularity.
    [[nodiscard]] static Reservation create(std::size_t bytes, std::size_t alignment = 0,
                                            CallCounter* counter = nullptr);
    explicit operator bool() const noexcept { return base_ != 0; }
    CUdeviceptr base() const noexcept { return base_; }
    std::size_t size() const noexcept { return size_; }
    void reset() noexcept;  // fails (reported, not thrown) while mappings remain

private:
    CUdeviceptr base_ = 0;
    std::size_t size_ = 0;
    CallCounter* counter_ = nullptr;
};

// One mapping of a whole chunk (or imported allocation) at `offset` inside a reservation, readable and
// writable from `access_devices` (the allocation's own device when empty).
class Mapping {
public:
    Mapping() noexcept = default;
    Mapping(Mapping&& other) noexcept;
    Mapping& operator=(Mapping&& other) noexcept;
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    ~Mapping();

    [[nodiscard]] static Mapping create(const Reservation& where, std::size_t offset, const PhysicalChunk& what,
                                        std::span<const int> access_devices = {}, CallCounter* counter = nullptr);
    [[nodiscard]] static Mapping create(const Reservation& where, std::size_t offset, const ImportedHandle& what,
                                        std::span<const int> access_devices = {}, CallCounter* counter = nullptr);
    // Misuse made compile errors: a raw value would bypass the reference that keeps the allocation named,
    // and a temporary chunk or reservation would be gone before the mapping it backs.
    static Mapping create(const Reservation&, std::size_t, CUmemGenericAllocationHandle, ...) = delete;
    static Mapping create(const Reservation&, std::size_t, PhysicalChunk&&, ...) = delete;
    static Mapping create(const Reservation&, std::size_t, ImportedHandle&&, ...) = delete;
    static Mapping create(Reservation&&, std::size_t, const PhysicalChunk&, ...) = delete;
    static Mapping create(Reservation&&, std::size_t, const ImportedHandle&, ...) = delete;

    explicit operator bool() const noexcept { return ptr_ != 0; }
    CUdeviceptr ptr() const noexcept { return ptr_; }
    std::size_t size() const noexcept { return size_; }
    bool reset() noexcept;  // unmaps now; false when the driver refused (reported, not thrown)

private:
    static Mapping map(const Reservation& where, std::size_t offset, const AllocationRef& what,
                       std::span<const int> access_devices, CallCounter* counter);
    CUdeviceptr ptr_ = 0;
    std::size_t size_ = 0;
    CallCounter* counter_ = nullptr;
};

// ---------------------------------------------------------------- the pool

struct PoolOptions {
    int device = 0;                              // default for buffers that do not say
    HandleKind kind = HandleKind::fabric;        // default for buffers that do not say
    std::size_t va_capacity = std::size_t{64} << 30;  // address space reserved per buffer: its growth limit
    std::size_t max_chunk = std::size_t{1} << 30;     // largest size class; growth maps chunks up to this
    std::size_t cache_limit = std::size_t{4} << 30;   // bytes of freed chunks kept for reuse
};

struct BufferOptions {
    std::optional<int> device;         // the pool's when unset
    std::optional<HandleKind> kind;    // the pool's when unset
};

struct PoolStats {
    std::size_t live_bytes = 0;    // mapped into buffers
    std::size_t cached_bytes = 0;  // held for reuse
    std::size_t peak_bytes = 0;    // max of live + cached: what the pool ever held at once
    std::uint64_t cache_hits = 0;  // chunks reused instead of created
    CallCounts calls;              // driver calls this pool made
};

namespace detail {
struct PoolCore;

// Chunks mapped back to back from one offset of a reservation, each with its mapping: a Buffer's contents
// inside its own reservation, and a DevicePool segment's inside the device's shared one. Chunks come from
// and go back to a PoolCore (its cache, or the driver past the cache's bound). Not thread-safe.
class ChunkRun {
public:
    ChunkRun() noexcept = default;
    ChunkRun(ChunkRun&& other) noexcept;
    ChunkRun& operator=(ChunkRun&& other) noexcept;  // releases what this run held first, never recycled
    ChunkRun(const ChunkRun&) = delete;
    ChunkRun& operator=(const ChunkRun&) = delete;
    ~ChunkRun() = default;  // owners shrink_to(0) first so the chunks reach the cache

    // Maps chunks at `va` offset `offset + mapped()` until at least `bytes` are mapped, none past `limit`
    // bytes from `offset`. On a failure the run keeps what it mapped before the failing chunk and rethrows.
    void grow_to(PoolCore& core, const Reservation& va, std::size_t offset, std::size_t limit, int device,
                 HandleKind kind, std::size_t bytes);
    // Unmaps whole chunks from the end while what stays mapped still covers `bytes`; they go back to `core`.
    void shrink_to(PoolCore* core, std::size_t bytes) noexcept;
    std::size_t mapped() const noexcept { return mapped_; }
    std::size_t count() const noexcept { return pieces_.size(); }
    const PhysicalChunk& chunk(std::size_t i) const { return pieces_.at(i).chunk; }

private:
    struct Piece {
        PhysicalChunk chunk;  // declared first: destroyed after its mapping
        Mapping mapping;
    };
    std::vector<Piece> pieces_;
    std::size_t mapped_ = 0;
};
}  // namespace detail

class FabricPool;

// One growable buffer: a fixed base address, `capacity()` bytes of address space, `size()` bytes mapped.
// Not itself thread-safe (one owner grows it); buffers of one pool may be used from different threads.
class Buffer {
public:
    Buffer() noexcept = default;
    Buffer(Buffer&&) noexcept;
    Buffer& operator=(Buffer&&) noexcept;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer();  // chunks go back to the pool's cache (or are released past its bound)

    explicit operator bool() const noexcept { return static_cast<bool>(va_); }
    CUdeviceptr ptr() const noexcept { return va_.base(); }
    std::size_t size() const noexcept { return run_.mapped(); }  // mapped bytes (>= what was asked)
    std::size_t capacity() const noexcept { return va_.size(); }
    int device() const noexcept { return device_; }
    HandleKind kind() const noexcept { return kind_; }

    // Maps chunks at the end until at least `bytes` are mapped; the address never changes. No-op when
    // already that large. Throws PoolError past capacity() or when the driver refuses.
    void grow_to(std::size_t bytes);
    // Unmaps whole chunks from the end while what stays mapped still covers `bytes`; they go to the cache.
    void shrink_to(std::size_t bytes);

    // The chunks, in address order, for export (SymmetricBuffer uses these).
    std::size_t chunk_count() const noexcept { return run_.count(); }
    const PhysicalChunk& chunk(std::size_t i) const { return run_.chunk(i); }

private:
    friend class FabricPool;
    void release_all() noexcept;

    std::shared_ptr<detail::PoolCore> core_;  // keeps the cache alive for as long as any buffer lives
    Reservation va_;                          // declared before run_: freed after every unmap
    detail::ChunkRun run_;
    int device_ = 0;
    HandleKind kind_ = HandleKind::fabric;
};

class FabricPool {
public:
    explicit FabricPool(PoolOptions options = {});
    FabricPool(const FabricPool&) = delete;
    FabricPool& operator=(const FabricPool&) = delete;
    ~FabricPool();  // trims; buffers still alive keep the cache alive and return their chunks to it

    [[nodiscard]] Buffer create_buffer(std::size_t bytes, BufferOptions options = {});
    std::size_t trim();  // releases every cached chunk; returns the bytes released
    PoolStats stats() const;
    const PoolOptions& options() const noexcept { return options_; }
    CallCounter& counter() noexcept;

private:
    PoolOptions options_;
    std::shared_ptr<detail::PoolCore> core_;
};

// ---------------------------------------------------------------- the symmetric exchange

// One peer's buffer seen from here: its chunks imported and mapped contiguously into a reservation of
// this process, growable the same way the peer's buffer grows.
class PeerView {
public:
    PeerView() noexcept = default;
    PeerView(PeerView&&) noexcept = default;
    // Not defaulted: member-wise assignment would free the old range (va_, declared first) while its
    // mappings are still there. Unmaps and releases first, then frees the range, like the destructor.
    PeerView& operator=(PeerView&& other) noexcept;
    PeerView(const PeerView&) = delete;
    PeerView& operator=(const PeerView&) = delete;
    ~PeerView() { clear(); }

    // Reserves `capacity` bytes of address space, usable from `access_device`.
    [[nodiscard]] static PeerView reserve(std::size_t capacity, int access_device, CallCounter* counter = nullptr);
    // Imports and maps `handles` after what is mapped already (the peer's new chunks, in order). The
    // handles are only read: close (destroy) them once this returns, as a receiving peer does.
    void extend(std::span<const ExportedHandle> handles);
    CUdeviceptr ptr() const noexcept { return va_.base(); }
    std::size_t size() const noexcept { return mapped_; }

private:
    void clear() noexcept;  // unmaps and releases every segment, newest first, then frees the range
    struct Segment {
        ImportedHandle import;
        Mapping mapping;
    };
    Reservation va_;
    std::vector<Segment> segments_;
    std::size_t mapped_ = 0;
    int access_device_ = 0;
    CallCounter* counter_ = nullptr;
};

// DeepEP's exchange on top of a pool buffer: export own chunks, import and map each peer's, tear down
// releasing every reference. Growth exchanges only the chunks added since the last export.
class SymmetricBuffer {
public:
    SymmetricBuffer(FabricPool& pool, std::size_t bytes, int peers, BufferOptions options = {});
    SymmetricBuffer(SymmetricBuffer&&) noexcept = default;
    SymmetricBuffer& operator=(SymmetricBuffer&&) = delete;  // would free the old local buffer before its peers
    ~SymmetricBuffer() { close(); }

    Buffer& local() noexcept { return local_; }
    // Grows the local buffer; the next export_new() returns the new chunks.
    void grow_to(std::size_t bytes) { local_.grow_to(bytes); }
    // Shareable handles of the chunks not exported yet, in address order: send them to every peer.
    [[nodiscard]] std::vector<ExportedHandle> export_new();
    // Maps peer `rank`'s chunks received from it (what its export_new() returned), after its earlier ones.
    void open_peer(int rank, std::span<const ExportedHandle> handles);
    const PeerView& peer(int rank) const { return peers_.at(static_cast<std::size_t>(rank)); }
    // Unmaps and releases every peer mapping and import, then the local buffer. Also what the destructor does.
    void close() noexcept;

private:
    Buffer local_;  // declared first: outlives the peer views, which may map this process's own chunks
    std::vector<PeerView> peers_;
    std::size_t exported_ = 0;  // chunks of local_ handed out so far
    CallCounter* counter_ = nullptr;
};

}  // namespace cumemaudit::pool
