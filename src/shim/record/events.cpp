#include "shim/record/events.hpp"

#include "shim/record/export_key.hpp"
#include "shim/record/recorder.hpp"
#include "shim/services/driver_query.hpp"

#include "common/array_bytes.hpp"
#include "common/cuda_errors.hpp"

namespace cumemaudit::shim {
namespace {

using ledger::HandleType;
using ledger::Kind;

ledger::Ledger& book(Call& call) { return call.recorder().ledger(); }

std::uint64_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// The handle types a creation asks for (CUmemAllocationProp::requestedHandleTypes, CUmulticastObjectProp::handleTypes).
HandleType requested_type(unsigned long long types) {
    if (types & CU_MEM_HANDLE_TYPE_FABRIC) return HandleType::fabric;
    if (types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return HandleType::posix_fd;
    return types == 0 ? HandleType::none : HandleType::other;
}

HandleType shared_type(CUmemAllocationHandleType type) {
    switch (type) {
        case CU_MEM_HANDLE_TYPE_FABRIC: return HandleType::fabric;
        case CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: return HandleType::posix_fd;
        default: return HandleType::other;
    }
}

ledger::Location location_of(const CUmemAllocationProp* prop) {
    using T = ledger::Location::Type;
    if (prop == nullptr) return {};
    switch (prop->location.type) {
        case CU_MEM_LOCATION_TYPE_DEVICE: return {T::device, prop->location.id};
        case CU_MEM_LOCATION_TYPE_HOST: return {T::host, -1};
        case CU_MEM_LOCATION_TYPE_HOST_NUMA: return {T::host_numa, prop->location.id};
        case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT: return {T::host_numa, -1};
        default: return {};
    }
}

// A successful call records with its full site; a failed one is recorded only as possible misuse, and
// then also needs its site. Successful calls whose site the ledger does not keep pass the bare API.
const ledger::Site& site_if_failed(Call& call, bool ok, ledger::Site& bare) {
    if (ok) return bare = call.bare();
    return call.site();
}

void allocated(Call& call, CUresult r, std::uint64_t ptr, std::uint64_t size, Kind kind) {
    if (r != CUDA_SUCCESS) return;
    const ledger::Site& site = call.site();
    const int device = ledger::counts_on_device(kind) ? call.recorder().call_device() : -1;
    book(call).allocated(ptr, size, kind, site, device);  // a free of ptr in flight holds its ticket (before())
    if (call.recorder().capturing()) call.recorder().timeline().captured(site.owner, size);
}

void freed(Call& call, CUresult r, std::uint64_t ptr) {
    const bool ok = r == CUDA_SUCCESS;
    if (ok && ptr == 0) return;  // freeing null is a no-op the driver accepts
    ledger::Site bare;
    // The answer's name only where the ledger reads it, a refusal: looking it up is one more line to miss.
    book(call).freed(ptr, ok, ok ? "CUDA_SUCCESS" : result_name(r), site_if_failed(call, ok, bare), call.free_ticket);
}

// An external memory object as its ledger record names it (ExternalBook::Object).
ExternalBook::Object external_object(Call& call, CUexternalMemory object) {
    return {addr(object), book(call).stamp_of(addr(object))};
}

void external_object_ended(Call& call, ExternalBook::Object object) {
    book(call).freed(object.address, true, result_name(CUDA_SUCCESS), ledger::Site{}, object.stamp);
}

}  // namespace


void record(ev::Create, Call& call, CUresult r, CUmemGenericAllocationHandle* handle, size_t size,
            const CUmemAllocationProp* prop, unsigned long long) {
    if (r != CUDA_SUCCESS || handle == nullptr) return;
    const ledger::Site& site = call.site();
    book(call).created(*handle, size, requested_type(prop != nullptr ? prop->requestedHandleTypes : 0), site,
                       location_of(prop));
    if (call.recorder().capturing()) call.recorder().timeline().captured(site.owner, size);
}

void record(ev::Release, Call& call, CUresult r, CUmemGenericAllocationHandle handle) {
    const bool ok = r == CUDA_SUCCESS;
    ledger::Site bare;
    book(call).released(handle, ok, result_name(r), site_if_failed(call, ok, bare));
}

void record(ev::Retain, Call& call, CUresult r, CUmemGenericAllocationHandle* handle, void* va) {
    if (r != CUDA_SUCCESS || handle == nullptr) return;
    const ledger::Site& site = call.site();
    book(call).retained(*handle, addr(va), site);
}

void record(ev::Export, Call& call, CUresult r, void* shareable, CUmemGenericAllocationHandle handle,
            CUmemAllocationHandleType type, unsigned long long) {
    if (r != CUDA_SUCCESS || shareable == nullptr) return;
    const HandleType t = shared_type(type);
    int fd = -1;
    ledger::ExportKey key;
    if (t == HandleType::posix_fd) {
        fd = *static_cast<const int*>(shareable);
        key = key_of_fd(fd);
    } else if (t == HandleType::fabric) {
        key = key_of_fabric(shareable);
    }
    book(call).exported(handle, t, key, fd, call.site());
}

void record(ev::Import, Call& call, CUresult r, CUmemGenericAllocationHandle* handle, void* os_handle,
            CUmemAllocationHandleType type) {
    if (r != CUDA_SUCCESS || handle == nullptr) return;
    const HandleType t = shared_type(type);
    ledger::ExportKey key;
    // A POSIX fd travels in the pointer's bits; a fabric handle is pointed to.
    if (t == HandleType::posix_fd) key = key_of_fd(static_cast<int>(addr(os_handle)));
    else if (t == HandleType::fabric && os_handle != nullptr) key = key_of_fabric(os_handle);
    const ledger::Site& site = call.site();
    book(call).imported(*handle, t, key, site);
}

void record(ev::Map, Call& call, CUresult r, CUdeviceptr ptr, size_t size, size_t, CUmemGenericAllocationHandle handle,
            unsigned long long) {
    // The ledger keeps no site of a successful map (its allocation keeps the create's): a deep unwind
    // saved, half of what a create+map+unmap+release cycle unwinds.
    const bool ok = r == CUDA_SUCCESS;
    ledger::Site bare;
    const ledger::Site& site = site_if_failed(call, ok, bare);
    book(call).mapped(ptr, size, handle, ok, result_name(r), site);
}

namespace {
// Only misuse keeps the site of an unmap or address free: it is captured only then.
auto site_of(Call& call) {
    return [&call]() -> const ledger::Site& { return call.site(); };
}
}  // namespace

void record(ev::Unmap, Call& call, CUresult r, CUdeviceptr ptr, size_t size) {
    auto site = site_of(call);
    book(call).unmapped(ptr, size, r == CUDA_SUCCESS, result_name(r), site);
}

void record(ev::Reserve, Call& call, CUresult r, CUdeviceptr* ptr, size_t size, size_t, CUdeviceptr,
            unsigned long long) {
    if (r != CUDA_SUCCESS || ptr == nullptr) return;
    const ledger::Site& site = call.site();
    book(call).reserved(*ptr, size, site);
}

void record(ev::AddressFree, Call& call, CUresult r, CUdeviceptr ptr, size_t size) {
    auto site = site_of(call);
    book(call).address_freed(ptr, size, r == CUDA_SUCCESS, result_name(r), site);
}

void record(ev::McCreate, Call& call, CUresult r, CUmemGenericAllocationHandle* handle, const CUmulticastObjectProp* prop) {
    if (r != CUDA_SUCCESS || handle == nullptr || prop == nullptr) return;
    book(call).multicast_created(*handle, prop->size, requested_type(prop->handleTypes), call.site());
}

void record(ev::McAddDevice, Call& call, CUresult r, CUmemGenericAllocationHandle handle, CUdevice) {
    const bool ok = r == CUDA_SUCCESS;
    ledger::Site bare;
    book(call).multicast_device_added(handle, ok, result_name(r), site_if_failed(call, ok, bare));
}

void record(ev::McBindMem, Call& call, CUresult r, CUmemGenericAllocationHandle mc, size_t mc_offset,
            CUmemGenericAllocationHandle mem, size_t, size_t size, unsigned long long) {
    book(call).multicast_bound(mc, mc_offset, mem, false, size, r == CUDA_SUCCESS, result_name(r), call.site());
}

void record(ev::McBindAddr, Call& call, CUresult r, CUmemGenericAllocationHandle mc, size_t mc_offset, CUdeviceptr ptr,
            size_t size, unsigned long long) {
    book(call).multicast_bound(mc, mc_offset, ptr, true, size, r == CUDA_SUCCESS, result_name(r), call.site());
}

void record(ev::McUnbind, Call& call, CUresult r, CUmemGenericAllocationHandle mc, CUdevice dev, size_t mc_offset,
            size_t size) {
    auto site = site_of(call);
    book(call).multicast_unbound(mc, dev, mc_offset, size, r == CUDA_SUCCESS, result_name(r), site);
}

void record(ev::AllocDevice, Call& call, CUresult r, CUdeviceptr* dptr, size_t size) {
    if (dptr != nullptr) allocated(call, r, *dptr, size, Kind::classic);
}

void record(ev::AllocPitch, Call& call, CUresult r, CUdeviceptr* dptr, size_t* pitch, size_t, size_t height,
            unsigned int) {
    if (dptr != nullptr && pitch != nullptr) allocated(call, r, *dptr, std::uint64_t{*pitch} * height, Kind::classic);
}

void record(ev::AllocManaged, Call& call, CUresult r, CUdeviceptr* dptr, size_t size, unsigned int) {
    if (dptr != nullptr) allocated(call, r, *dptr, size, Kind::managed);
}

namespace {
// Stream-ordered memory asked for on a capturing stream is the graph's: committed at its launch.
bool captured_on(Call& call, CUstream stream) {
    return call.recorder().capturing() && call.recorder().timeline().is_capturing(stream);
}
}  // namespace

void record(ev::AllocAsync, Call& call, CUresult r, CUdeviceptr* dptr, size_t size, CUstream stream) {
    if (dptr != nullptr) allocated(call, r, *dptr, size, captured_on(call, stream) ? Kind::graph : Kind::async_pool);
}

void record(ev::AllocFromPool, Call& call, CUresult r, CUdeviceptr* dptr, size_t size, CUmemoryPool pool, CUstream stream) {
    if (dptr == nullptr) return;
    const Kind kind = captured_on(call, stream) ? Kind::graph : call.recorder().pools().allocation_kind(pool);
    allocated(call, r, *dptr, size, kind);
}

void record(ev::HostAlloc, Call& call, CUresult r, void** pp, size_t size, unsigned int) {
    if (pp != nullptr) allocated(call, r, addr(*pp), size, Kind::host_pinned);
}

void record(ev::AllocHost, Call& call, CUresult r, void** pp, size_t size) {
    if (pp != nullptr) allocated(call, r, addr(*pp), size, Kind::host_pinned);
}

void record(ev::IpcOpen, Call& call, CUresult r, CUdeviceptr* dptr, CUipcMemHandle handle, unsigned int) {
    // The size of a peer's allocation is not in the call, and the driver answers an empty range for an open
    // (measured): the exporter's report has it, and `merge` joins the two by the handle's key.
    if (r != CUDA_SUCCESS || dptr == nullptr) return;
    allocated(call, r, *dptr, 0, Kind::ipc);
    book(call).ipc_opened(*dptr, key_of_fabric(&handle), call.site());
}

// A pool pointer shared with another process: the same rows as a legacy IPC handle's, joined by the bytes
// of its export data (the importer's driver answers an empty range for it, measured).
void record(ev::PoolExportPtr, Call& call, CUresult r, CUmemPoolPtrExportData* data, CUdeviceptr ptr) {
    if (r == CUDA_SUCCESS && data != nullptr) book(call).ipc_exported(ptr, key_of_fabric(data), call.site());
}

void record(ev::PoolImportPtr, Call& call, CUresult r, CUdeviceptr* ptr, CUmemoryPool, CUmemPoolPtrExportData* data) {
    if (r != CUDA_SUCCESS || ptr == nullptr || data == nullptr) return;
    allocated(call, r, *ptr, 0, Kind::ipc);
    book(call).ipc_opened(*ptr, key_of_fabric(data), call.site());
}

void record(ev::IpcGet, Call& call, CUresult r, CUipcMemHandle* handle, CUdeviceptr ptr) {
    if (r == CUDA_SUCCESS && handle != nullptr) book(call).ipc_exported(ptr, key_of_fabric(handle), call.site());
}

void record(ev::RangeHandle, Call& call, CUresult r, void* handle, CUdeviceptr ptr, size_t, CUmemRangeHandleType type,
            unsigned long long) {
    if (r != CUDA_SUCCESS || handle == nullptr || type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) return;
    const int fd = *static_cast<const int*>(handle);
    book(call).range_exported(ptr, fd, key_of_fd(fd), call.site());
}

void record(ev::HostRegister, Call& call, CUresult r, void* p, size_t size, unsigned int flags) {
    if (r == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
        book(call).misused(call.site(), result_name(r), "register of host memory already registered");
    // I/O memory (a network card's doorbell, a BAR) pins nothing: its row holds the registration, not bytes.
    if ((flags & CU_MEMHOSTREGISTER_IOMEMORY) != 0) allocated(call, r, addr(p), 0, Kind::io_registered);
    else allocated(call, r, addr(p), size, Kind::host_registered);
}

void record(ev::HostUnregister, Call& call, CUresult r, void* p) {
    if (r == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED) {
        book(call).misused(call.site(), result_name(r), "unregister of host memory not registered");
        return;
    }
    freed(call, r, addr(p));
}

namespace {

// Managed memory prefetched onto a device: booked to its allocation, so an out-of-memory record can name the
// line that moved the most of the device's managed memory there.
void prefetched(Call& call, CUdeviceptr ptr, size_t bytes, int device) {
    const AddressRange range = allocation_holding(ptr);
    if (range.base == 0) return;  // not an allocation the driver sizes (pageable memory on HMM systems)
    call.recorder().managed().prefetched(range.base, bytes, device, call.site());  // the driver refuses one past the end
}

}  // namespace

void record(ev::Prefetch, Call& call, CUresult r, CUdeviceptr ptr, size_t bytes, CUdevice to, CUstream) {
    if (r == CUDA_SUCCESS && to != CU_DEVICE_CPU) prefetched(call, ptr, bytes, to);
}

void record(ev::Prefetch, Call& call, CUresult r, CUdeviceptr ptr, size_t bytes, CUmemLocation to, unsigned int, CUstream) {
    if (r == CUDA_SUCCESS && to.type == CU_MEM_LOCATION_TYPE_DEVICE) prefetched(call, ptr, bytes, to.id);
}

void record(ev::Free, Call& call, CUresult r, CUdeviceptr dptr) {
    freed(call, r, dptr);
    if (r == CUDA_SUCCESS) call.recorder().managed().freed(dptr);
    // A buffer of external memory destroyed before it: the object's memory goes with its last buffer. The
    // object's record ends by its own stamp; the call's ticket is the buffer's.
    if (r == CUDA_SUCCESS && call.recorder().hot().external_buffers.load(std::memory_order_relaxed) > 0)
        if (const ExternalBook::Object object = call.recorder().externals().buffer_freed(dptr); object.address != 0)
            external_object_ended(call, object);
}

void record(ev::ExtImport, Call& call, CUresult r, CUexternalMemory* out, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC* desc) {
    if (out != nullptr && desc != nullptr) allocated(call, r, addr(*out), desc->size, Kind::external);
}

void record(ev::ExtBuffer, Call& call, CUresult r, CUdeviceptr* ptr, CUexternalMemory object, const CUDA_EXTERNAL_MEMORY_BUFFER_DESC*) {
    if (r != CUDA_SUCCESS || ptr == nullptr) return;
    allocated(call, r, *ptr, 0, Kind::external);
    call.recorder().externals().mapped(*ptr, external_object(call, object));
}

void record(ev::ExtDestroy, Call& call, CUresult r, CUexternalMemory object) {
    if (r != CUDA_SUCCESS) return freed(call, r, addr(object));
    const ExternalBook::Object named = external_object(call, object);
    if (call.recorder().externals().destroyed(named)) external_object_ended(call, named);
}
void record(ev::FreeAsync, Call& call, CUresult r, CUdeviceptr dptr, CUstream) { freed(call, r, dptr); }
void record(ev::FreeHost, Call& call, CUresult r, void* p) { freed(call, r, addr(p)); }
void record(ev::IpcClose, Call& call, CUresult r, CUdeviceptr dptr) { freed(call, r, dptr); }
void record(ev::GraphFreeNode, Call& call, CUresult r, CUgraphNode*, CUgraph, const CUgraphNode*, size_t, CUdeviceptr dptr) {
    freed(call, r, dptr);
}

std::uint64_t described_bytes(const CUDA_ARRAY3D_DESCRIPTOR* d, unsigned levels) {
    return d == nullptr ? 0 : array_bytes(*d, levels).value_or(0);
}
std::uint64_t described_bytes(const CUDA_ARRAY_DESCRIPTOR* d, unsigned levels) {
    if (d == nullptr) return 0;
    const CUDA_ARRAY3D_DESCRIPTOR d3 = as_3d(*d);
    return described_bytes(&d3, levels);
}

namespace {
// An array is booked under its handle, with the context whose end frees it.
void array_made(Call& call, CUresult r, const void* handle, std::uint64_t bytes) {
    if (r != CUDA_SUCCESS || handle == nullptr) return;
    call.recorder().arrays().created(addr(handle), current_context());
    allocated(call, r, addr(handle), bytes, Kind::array);
}
}  // namespace

void record(ev::ArrayCreate, Call& call, CUresult r, CUarray* out, const CUDA_ARRAY_DESCRIPTOR* desc) {
    if (out != nullptr) array_made(call, r, *out, described_bytes(desc, 1));
}
void record(ev::ArrayCreate, Call& call, CUresult r, CUarray* out, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
    if (out != nullptr) array_made(call, r, *out, described_bytes(desc, 1));
}
void record(ev::MipmapCreate, Call& call, CUresult r, CUmipmappedArray* out, const CUDA_ARRAY3D_DESCRIPTOR* desc,
            unsigned int levels) {
    if (out != nullptr) array_made(call, r, *out, described_bytes(desc, levels));
}
void record(ev::ArrayDestroy, Call& call, CUresult r, CUarray a) {
    if (r == CUDA_SUCCESS) call.recorder().arrays().destroyed(addr(a));
    freed(call, r, addr(a));
}
void record(ev::ArrayDestroy, Call& call, CUresult r, CUmipmappedArray m) {
    if (r == CUDA_SUCCESS) call.recorder().arrays().destroyed(addr(m));
    freed(call, r, addr(m));
}

const char* result_name(CUresult r) {
    const cuda_errors::Row* row = cuda_errors::find(r);
    return row != nullptr ? row->name : "CUDA_ERROR_OTHER";  // a code newer than this build's cuda.h
}

}  // namespace cumemaudit::shim
