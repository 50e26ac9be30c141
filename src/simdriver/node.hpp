// node: what the processes of one simulated node share — the devices' capacity and used bytes, physical
// allocations with each process's reference and mapping counts, exported POSIX fds, and which slice of
// device address space each process draws from. With CUMEMAUDIT_SIM_NODE set it lives in a POSIX shared
// memory segment ("/cumemaudit-sim-<name>") so several processes see the same devices; unset, the same
// layout lives in private memory and nothing changes for a single process.
//
// The segment holds no pointers, only fixed tables indexed by slot, and one robust process-shared mutex:
// a process killed while holding it leaves it to the next locker (EOWNERDEAD), and its references,
// mappings, classic bytes and exports are dropped when any process next locks the node and finds it gone
// (kill(pid, 0) == ESRCH), as the real driver drops a dead process's. The segment is never unlinked by
// the driver: a node outlives its processes, as a machine does; tests use unique names and unlink them.
//
// POSIX-fd exports across processes: the exporter keeps the read end of a pipe whose write end is the fd
// it hands out; every copy of the write end (in any process) closed shows as POLLHUP on the read end. The
// exporter polls its own read end; another process opens it through /proc/<exporter>/fd/<n> (checking
// the pipe's inode) to ask the same question. Only the exporter removes its export records (it must close
// its read end); an exporter's death drops them.
#pragma once

#include "config.hpp"

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cumemaudit::sim {

inline constexpr int kNodeDevices = 64;               // config.cpp's upper bound on CUMEMAUDIT_SIM_DEVICES
inline constexpr std::uint32_t kNodeAllocations = 65536;
inline constexpr std::uint32_t kNodeProcesses = 256;
inline constexpr std::uint32_t kNodeUsers = 32;        // processes holding one allocation at once
inline constexpr std::uint32_t kNodeExports = 4096;    // open POSIX-fd exports on the node
inline constexpr std::uint32_t kNodeBinds = 4096;      // memory bound to multicast objects, node-wide
inline constexpr std::uint64_t kNodeVaBase = 16ull << 40;  // per-process device VA slices start here
inline constexpr std::uint64_t kNodeVaSlice = 256ull << 30;

struct NodeSegment;  // the layout, private to node.cpp
struct NodeAlloc;

class SimNode {
public:
    // name null or empty: a private node. Otherwise attaches to (or creates, with `config`) the named
    // node; the creator's config holds for every process. Null with `error` set when that fails.
    static std::unique_ptr<SimNode> open(const char* name, const Config& config, std::string& error);
    ~SimNode();
    SimNode(const SimNode&) = delete;
    SimNode& operator=(const SimNode&) = delete;

    // Everything below needs the lock. Taking it also drops the holdings of processes that are gone.
    class Lock {
    public:
        explicit Lock(SimNode&);
        ~Lock();
        Lock(const Lock&) = delete;
        Lock& operator=(const Lock&) = delete;

    private:
        SimNode& node_;
    };

    bool shared() const { return shared_; }
    Config config() const;
    std::uint64_t node_id() const;
    // This process's device VA slice [start, start + kNodeVaSlice) on a shared node; 0 on a private one.
    std::uint64_t va_slice() const;

    // ---- device capacity. Classic bytes are counted per process so a dead process's come back.
    std::uint64_t used(int device) const;
    // What NVML would list for the device: each live process with its classic bytes plus the physical
    // allocations it created that are still alive (an allocation kept alive by importers after its creator
    // died is charged to nobody).
    struct ProcessUse {
        std::int32_t pid;
        std::uint64_t bytes;
    };
    std::vector<ProcessUse> processes(int device) const;
    bool charge_classic(int device, std::uint64_t bytes);  // false: not enough free memory
    void uncharge_classic(int device, std::uint64_t bytes);
    // Managed memory made resident on `device`: used there, charged to this process, and listed by NVML for
    // no process (measured).
    bool charge_unlisted(int device, std::uint64_t bytes);
    void uncharge_unlisted(int device, std::uint64_t bytes);

    // ---- physical allocations. Ids never repeat on a node (generation above the slot), never 0.
    enum class CreateResult { ok, out_of_memory, table_full };
    // device -1: host memory, charged to no device.
    CreateResult create(int device, std::uint64_t size, const CUmemAllocationProp&, const std::uint64_t nonce[4],
                        std::uint64_t* id);
    // A multicast object: an allocation of no device (nothing charged) whose team has `team` devices; its
    // handle is referenced, mapped and exported like memory's. `handle_types` is what it may be exported as.
    CreateResult create_multicast(std::uint64_t size, unsigned team, unsigned long long handle_types,
                                  const std::uint64_t nonce[4], std::uint64_t* id);
    bool is_multicast(std::uint64_t id) const;
    // Adds `device` to the team; false when it is in it already or the team is full.
    bool add_team_device(std::uint64_t id, int device);
    bool team_has(std::uint64_t id, int device) const;
    bool team_complete(std::uint64_t id) const;
    // Binds [mem_offset, + size) of memory `mem` (on `device`) at mc_offset of multicast object `mc`. The
    // bind pins the memory as a mapping of this process does, until it is unbound or the object is freed.
    // False when a bind of that device already overlaps the range, or the table is full.
    bool bind(std::uint64_t mc, std::uint64_t mem, int device, std::uint64_t mc_offset, std::uint64_t size);
    // Unbinds what `device` has bound to `mc` inside [mc_offset, + size), freeing memory only the binds
    // pinned; how many binds went.
    int unbind(std::uint64_t mc, int device, std::uint64_t mc_offset, std::uint64_t size);
    bool alive(std::uint64_t id) const;
    int device_of(std::uint64_t id) const;
    std::uint64_t size_of(std::uint64_t id) const;
    CUmemAllocationProp prop_of(std::uint64_t id) const;
    void nonce_of(std::uint64_t id, std::uint64_t out[4]) const;  // proves a fabric blob came from the allocation
    bool nonce_matches(std::uint64_t id, const std::uint64_t nonce[4]) const;
    // This process's references / mappings change by the deltas; false when the allocation already has
    // kNodeUsers processes and this one is not among them.
    bool add_use(std::uint64_t id, int refs, int maps);
    // Frees the allocation when no process holds a reference or mapping and no exported fd is open;
    // true when it is gone (freed now or before).
    bool maybe_free(std::uint64_t id);

    // ---- exported POSIX fds (see the header comment).
    bool add_export(std::uint64_t id, int read_fd, std::uint64_t st_dev, std::uint64_t st_ino);
    std::uint64_t export_lookup(std::uint64_t st_dev, std::uint64_t st_ino) const;  // 0: none
    // Drops this process's exports whose every fd copy is closed, then frees what only they pinned.
    void reap_exports();

private:
    SimNode() = default;
    int self();  // this process's slot, registering it (again, in a fork child) when needed
    void reap_dead();
    void drop_process(std::uint32_t slot);
    bool export_open(std::uint32_t e) const;
    bool adjust_use(std::uint64_t id, std::int32_t pid, int refs, int maps);
    void drop_bind(std::uint32_t b);  // its pin goes; frees the memory if nothing else holds it
    std::uint32_t alloc_slot(std::uint64_t id) const;  // kNodeAllocations when not alive
    NodeAlloc* take_slot(int device, std::uint64_t size, const std::uint64_t nonce[4]);

    NodeSegment* seg_ = nullptr;
    std::size_t bytes_ = 0;
    bool shared_ = false;
    int pid_ = 0, slot_ = -1;
};

}  // namespace cumemaudit::sim
