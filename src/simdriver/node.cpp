// The simulated node's shared tables; see node.hpp.
#include "node.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <functional>
#include <string_view>

namespace cumemaudit::sim {

namespace {
constexpr std::uint64_t kMagic = 0x32454430444f4e43ull;  // "CNOD0DE2": the creator finished initializing
}

struct NodeUser {
    std::int32_t pid, refs, maps;
};

struct NodeAlloc {
    std::uint64_t id;  // 0: free slot
    std::int32_t device;  // -1: host memory or a multicast object, charged to no device
    std::uint32_t team;   // multicast objects: devices the team needs, and which were added (a bit each)
    std::uint64_t team_added;
    std::int32_t creator;  // pid NVML charges the allocation to, as the real driver charges its creator
    std::uint32_t users;  // entries used in user[]
    std::uint64_t size;
    CUmemAllocationProp prop;
    std::uint64_t nonce[4];
    NodeUser user[kNodeUsers];
};

struct NodeProcess {
    std::int32_t pid;  // 0: free slot; the slot number is also the process's VA slice
    std::uint64_t classic[kNodeDevices];
    std::uint64_t unlisted[kNodeDevices];  // of classic: managed memory resident there, which NVML charges to nobody
};

struct NodeExport {
    std::uint64_t alloc;  // 0: free slot
    std::int32_t pid, read_fd;
    std::uint64_t st_dev, st_ino;
};

struct NodeBind {
    std::uint64_t mc;  // 0: free slot
    std::uint64_t mem;
    std::int32_t pid, device;
    std::uint64_t mc_offset, size;
};

struct NodeSegment {
    std::atomic<std::uint64_t> magic;
    pthread_mutex_t mu;
    std::uint64_t node_id;
    std::uint64_t memory_per_device;
    std::int32_t devices;
    std::uint64_t used[kNodeDevices];
    std::uint64_t generation;
    std::uint32_t alloc_cursor, alloc_high;  // next slot to try; one past the highest slot ever used
    std::uint32_t exp_high;                  // one past the highest export slot ever used: scans stop there
    NodeProcess proc[kNodeProcesses];
    NodeExport exp[kNodeExports];
    std::uint32_t bind_high;  // one past the highest bind slot ever used
    NodeBind binds[kNodeBinds];
    NodeAlloc alloc[kNodeAllocations];
};

namespace {

bool process_gone(std::int32_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

void init_segment(NodeSegment* s, const Config& c, std::uint64_t node_id, bool shared) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    if (shared) pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&s->mu, &a);
    pthread_mutexattr_destroy(&a);
    s->node_id = node_id;
    s->memory_per_device = c.memory_per_device;
    s->devices = c.devices;
    s->magic.store(kMagic, std::memory_order_release);
}

std::uint64_t host_hash(std::string_view extra) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return (std::hash<std::string_view>{}(host) ^ std::hash<std::string_view>{}(extra) * 31) | 1;
}

}  // namespace

std::unique_ptr<SimNode> SimNode::open(const char* name, const Config& config, std::string& error) {
    std::unique_ptr<SimNode> n(new SimNode());
    n->bytes_ = sizeof(NodeSegment);
    n->pid_ = ::getpid();
    if (name == nullptr || *name == '\0') {
        // Private (and copied, not shared, into a fork child: a driver's state never survives fork).
        void* p = ::mmap(nullptr, n->bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            error = "cumemaudit-sim: cannot allocate the driver's state";
            return nullptr;
        }
        n->seg_ = static_cast<NodeSegment*>(p);
        init_segment(n->seg_, config, host_hash(""), false);
        return n;
    }
    const std::string shm = std::string("/cumemaudit-sim-") + name;
    if (std::strchr(name, '/') != nullptr || shm.size() > 200) {
        error = std::string("cumemaudit-sim: CUMEMAUDIT_SIM_NODE='") + name + "' is not a node name (no '/', at most 180 characters)";
        return nullptr;
    }
    bool creator = true;
    int fd = ::shm_open(shm.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) {
        creator = false;
        fd = ::shm_open(shm.c_str(), O_RDWR | O_CLOEXEC, 0600);
    }
    if (fd < 0) {
        error = "cumemaudit-sim: cannot open node " + shm + ": " + std::strerror(errno);
        return nullptr;
    }
    if (creator && ::ftruncate(fd, static_cast<off_t>(n->bytes_)) != 0) {
        error = "cumemaudit-sim: cannot size node " + shm + ": " + std::strerror(errno);
        ::close(fd);
        ::shm_unlink(shm.c_str());
        return nullptr;
    }
    // A joiner may arrive between the creator's shm_open and ftruncate: wait (bounded) for the size.
    for (int i = 0; !creator && i < 2000; ++i) {
        struct stat st {};
        if (::fstat(fd, &st) == 0 && static_cast<std::size_t>(st.st_size) >= n->bytes_) break;
        timespec t{0, 1'000'000};
        nanosleep(&t, nullptr);
    }
    void* p = ::mmap(nullptr, n->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) {
        error = "cumemaudit-sim: cannot map node " + shm + ": " + std::strerror(errno);
        return nullptr;
    }
    n->seg_ = static_cast<NodeSegment*>(p);
    n->shared_ = true;
    if (creator) {
        init_segment(n->seg_, config, host_hash(name), true);
    } else {
        for (int i = 0; i < 2000 && n->seg_->magic.load(std::memory_order_acquire) != kMagic; ++i) {
            timespec t{0, 1'000'000};
            nanosleep(&t, nullptr);
        }
        if (n->seg_->magic.load(std::memory_order_acquire) != kMagic) {
            error = "cumemaudit-sim: node " + shm + " was never initialized (remove /dev/shm" + shm + ")";
            return nullptr;
        }
    }
    Lock lock(*n);  // registers this process and takes its VA slice
    if (n->slot_ < 0) {
        error = "cumemaudit-sim: node " + shm + " has no room for another process";
        return nullptr;
    }
    return n;
}

SimNode::~SimNode() {
    if (seg_ != nullptr) ::munmap(seg_, bytes_);
}

SimNode::Lock::Lock(SimNode& n) : node_(n) {
    // A holder that died mid-update may leave one record half-changed; the rest is sound, and its own
    // holdings are dropped by reap_dead below.
    if (pthread_mutex_lock(&n.seg_->mu) == EOWNERDEAD) pthread_mutex_consistent(&n.seg_->mu);
    if (n.shared_) {
        n.reap_dead();
        n.self();
    }
}

SimNode::Lock::~Lock() { pthread_mutex_unlock(&node_.seg_->mu); }

int SimNode::self() {
    if (!shared_) return 0;
    const int pid = ::getpid();
    if (pid == pid_ && slot_ >= 0) return slot_;
    pid_ = pid;
    slot_ = -1;
    // A slot still naming this pid belongs to a process that died and whose pid was reused.
    for (std::uint32_t i = 0; i < kNodeProcesses; ++i)
        if (seg_->proc[i].pid == pid) drop_process(i);
    for (std::uint32_t i = 0; i < kNodeProcesses; ++i) {
        if (seg_->proc[i].pid != 0) continue;
        // The slice may be taken in this process's address space (a library mapped there): try the next.
        void* want = reinterpret_cast<void*>(kNodeVaBase + i * kNodeVaSlice);
        void* got = ::mmap(want, kNodeVaSlice, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE,
                           -1, 0);
        if (got == MAP_FAILED) continue;
        if (got != want) {  // an old kernel ignoring the flag
            ::munmap(got, kNodeVaSlice);
            continue;
        }
        ::munmap(got, kNodeVaSlice);  // VaArena maps it again for good
        seg_->proc[i] = NodeProcess{pid, {}, {}};
        slot_ = static_cast<int>(i);
        break;
    }
    return slot_;
}

void SimNode::reap_dead() {
    for (std::uint32_t i = 0; i < kNodeProcesses; ++i) {
        const std::int32_t pid = seg_->proc[i].pid;
        if (pid != 0 && pid != ::getpid() && process_gone(pid)) drop_process(i);
    }
}

void SimNode::drop_process(std::uint32_t slot) {
    NodeProcess& p = seg_->proc[slot];
    for (int d = 0; d < kNodeDevices; ++d) seg_->used[d] -= p.classic[d];
    for (std::uint32_t e = 0; e < seg_->exp_high; ++e)
        if (seg_->exp[e].alloc != 0 && seg_->exp[e].pid == p.pid) seg_->exp[e] = NodeExport{};  // its read end died with it
    for (std::uint32_t b = 0; b < seg_->bind_high; ++b)
        if (seg_->binds[b].mc != 0 && seg_->binds[b].pid == p.pid) seg_->binds[b] = NodeBind{};  // its pins go below
    for (std::uint32_t s = 0; s < seg_->alloc_high; ++s) {
        NodeAlloc& a = seg_->alloc[s];
        if (a.id == 0) continue;
        const auto end = a.user + a.users;
        const auto it = std::find_if(a.user, end, [&](const NodeUser& u) { return u.pid == p.pid; });
        if (it == end) continue;
        *it = a.user[--a.users];
        maybe_free(a.id);
    }
    p = NodeProcess{};
}

Config SimNode::config() const {
    Config c;
    c.memory_per_device = seg_->memory_per_device;
    c.devices = seg_->devices;
    return c;
}

std::uint64_t SimNode::node_id() const { return seg_->node_id; }

std::uint64_t SimNode::va_slice() const { return shared_ && slot_ >= 0 ? kNodeVaBase + slot_ * kNodeVaSlice : 0; }

std::uint64_t SimNode::used(int device) const { return seg_->used[device]; }

std::vector<SimNode::ProcessUse> SimNode::processes(int device) const {
    std::vector<ProcessUse> out;
    auto charge = [&](std::int32_t pid, std::uint64_t bytes) {
        auto it = std::find_if(out.begin(), out.end(), [&](const ProcessUse& p) { return p.pid == pid; });
        if (it == out.end()) out.push_back({pid, bytes});
        else it->bytes += bytes;
    };
    if (!shared_) {  // one process, unregistered (slot 0): everything on the device is its own but managed memory
        charge(::getpid(), seg_->used[device] - seg_->proc[0].unlisted[device]);
        return out;
    }
    for (const NodeProcess& p : seg_->proc)
        if (p.pid != 0) charge(p.pid, p.classic[device] - p.unlisted[device]);
    for (std::uint32_t s = 0; s < seg_->alloc_high; ++s) {
        const NodeAlloc& a = seg_->alloc[s];
        if (a.id != 0 && a.device == device &&
            std::any_of(seg_->proc, seg_->proc + kNodeProcesses, [&](const NodeProcess& p) { return p.pid == a.creator; }))
            charge(a.creator, a.size);
    }
    return out;
}

bool SimNode::charge_classic(int device, std::uint64_t bytes) {
    if (bytes > seg_->memory_per_device - seg_->used[device]) return false;
    seg_->used[device] += bytes;
    seg_->proc[self()].classic[device] += bytes;
    return true;
}

void SimNode::uncharge_classic(int device, std::uint64_t bytes) {
    seg_->used[device] -= bytes;
    seg_->proc[self()].classic[device] -= bytes;
}

bool SimNode::charge_unlisted(int device, std::uint64_t bytes) {
    if (!charge_classic(device, bytes)) return false;
    seg_->proc[self()].unlisted[device] += bytes;
    return true;
}

void SimNode::uncharge_unlisted(int device, std::uint64_t bytes) {
    uncharge_classic(device, bytes);
    seg_->proc[self()].unlisted[device] -= bytes;
}

// A free allocation slot, taken for this process with one reference; null when the table is full.
NodeAlloc* SimNode::take_slot(int device, std::uint64_t size, const std::uint64_t nonce[4]) {
    for (std::uint32_t n = 0; n < kNodeAllocations; ++n) {
        const std::uint32_t s = (seg_->alloc_cursor + n) % kNodeAllocations;
        NodeAlloc& a = seg_->alloc[s];
        if (a.id != 0) continue;
        seg_->alloc_cursor = (s + 1) % kNodeAllocations;
        seg_->alloc_high = std::max(seg_->alloc_high, s + 1);
        a = NodeAlloc{};
        a.id = (++seg_->generation << 16) | s;
        a.device = device;
        a.size = size;
        std::copy(nonce, nonce + 4, a.nonce);
        a.creator = pid_;
        a.users = 1;
        a.user[0] = NodeUser{pid_, 1, 0};
        return &a;
    }
    return nullptr;
}

SimNode::CreateResult SimNode::create(int device, std::uint64_t size, const CUmemAllocationProp& prop,
                                      const std::uint64_t nonce[4], std::uint64_t* id) {
    if (device >= 0 && size > seg_->memory_per_device - seg_->used[device]) return CreateResult::out_of_memory;
    NodeAlloc* a = take_slot(device, size, nonce);
    if (a == nullptr) return CreateResult::table_full;
    a->prop = prop;
    if (device >= 0) seg_->used[device] += size;
    *id = a->id;
    return CreateResult::ok;
}

SimNode::CreateResult SimNode::create_multicast(std::uint64_t size, unsigned team, unsigned long long handle_types,
                                                const std::uint64_t nonce[4], std::uint64_t* id) {
    NodeAlloc* a = take_slot(-1, size, nonce);
    if (a == nullptr) return CreateResult::table_full;
    a->team = team;
    a->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    a->prop.location.type = CU_MEM_LOCATION_TYPE_INVALID;
    a->prop.requestedHandleTypes = static_cast<CUmemAllocationHandleType>(handle_types);
    *id = a->id;
    return CreateResult::ok;
}

bool SimNode::is_multicast(std::uint64_t id) const { return alive(id) && seg_->alloc[id & 0xffff].team > 0; }

bool SimNode::add_team_device(std::uint64_t id, int device) {
    NodeAlloc& a = seg_->alloc[id & 0xffff];
    const std::uint64_t bit = 1ull << device;
    if ((a.team_added & bit) != 0 || static_cast<unsigned>(__builtin_popcountll(a.team_added)) >= a.team) return false;
    a.team_added |= bit;
    return true;
}

bool SimNode::team_has(std::uint64_t id, int device) const {
    return (seg_->alloc[id & 0xffff].team_added & (1ull << device)) != 0;
}

bool SimNode::team_complete(std::uint64_t id) const {
    const NodeAlloc& a = seg_->alloc[id & 0xffff];
    return static_cast<unsigned>(__builtin_popcountll(a.team_added)) >= a.team;
}

bool SimNode::bind(std::uint64_t mc, std::uint64_t mem, int device, std::uint64_t mc_offset, std::uint64_t size) {
    std::uint32_t free_slot = kNodeBinds;
    for (std::uint32_t b = 0; b < kNodeBinds; ++b) {
        const NodeBind& x = seg_->binds[b];
        if (x.mc == 0) {
            if (free_slot == kNodeBinds) free_slot = b;
            if (b >= seg_->bind_high) break;
            continue;
        }
        if (x.mc == mc && x.device == device && x.mc_offset < mc_offset + size && mc_offset < x.mc_offset + x.size)
            return false;
    }
    if (free_slot == kNodeBinds || !add_use(mem, 0, 1)) return false;
    seg_->binds[free_slot] = NodeBind{mc, mem, pid_, device, mc_offset, size};
    seg_->bind_high = std::max(seg_->bind_high, free_slot + 1);
    return true;
}

void SimNode::drop_bind(std::uint32_t b) {
    const NodeBind x = seg_->binds[b];
    seg_->binds[b] = NodeBind{};
    if (adjust_use(x.mem, x.pid, 0, -1)) maybe_free(x.mem);
}

int SimNode::unbind(std::uint64_t mc, int device, std::uint64_t mc_offset, std::uint64_t size) {
    int n = 0;
    for (std::uint32_t b = 0; b < seg_->bind_high; ++b) {
        const NodeBind& x = seg_->binds[b];
        if (x.mc != mc || x.device != device || x.mc_offset < mc_offset || x.mc_offset + x.size > mc_offset + size) continue;
        drop_bind(b);
        ++n;
    }
    return n;
}

std::uint32_t SimNode::alloc_slot(std::uint64_t id) const {
    const std::uint32_t s = static_cast<std::uint32_t>(id & 0xffff);
    return id != 0 && seg_->alloc[s].id == id ? s : kNodeAllocations;
}

bool SimNode::alive(std::uint64_t id) const { return alloc_slot(id) != kNodeAllocations; }
int SimNode::device_of(std::uint64_t id) const { return seg_->alloc[id & 0xffff].device; }
std::uint64_t SimNode::size_of(std::uint64_t id) const { return seg_->alloc[id & 0xffff].size; }
CUmemAllocationProp SimNode::prop_of(std::uint64_t id) const { return seg_->alloc[id & 0xffff].prop; }

void SimNode::nonce_of(std::uint64_t id, std::uint64_t out[4]) const {
    const std::uint64_t* n = seg_->alloc[id & 0xffff].nonce;
    std::copy(n, n + 4, out);
}

bool SimNode::nonce_matches(std::uint64_t id, const std::uint64_t nonce[4]) const {
    return alive(id) && std::equal(nonce, nonce + 4, seg_->alloc[id & 0xffff].nonce);
}

bool SimNode::add_use(std::uint64_t id, int refs, int maps) { return adjust_use(id, pid_, refs, maps); }

bool SimNode::adjust_use(std::uint64_t id, std::int32_t pid, int refs, int maps) {
    const std::uint32_t s = alloc_slot(id);
    if (s == kNodeAllocations) return false;
    NodeAlloc& a = seg_->alloc[s];
    auto it = std::find_if(a.user, a.user + a.users, [&](const NodeUser& u) { return u.pid == pid; });
    if (it == a.user + a.users) {
        if (a.users == kNodeUsers || refs < 0 || maps < 0) return false;
        *it = NodeUser{pid, 0, 0};
        ++a.users;
    }
    it->refs += refs;
    it->maps += maps;
    if (it->refs == 0 && it->maps == 0) *it = a.user[--a.users];
    return true;
}

bool SimNode::export_open(std::uint32_t e) const {
    const NodeExport& x = seg_->exp[e];
    int fd = x.read_fd;
    if (x.pid != pid_) {
        const std::string path = "/proc/" + std::to_string(x.pid) + "/fd/" + std::to_string(x.read_fd);
        fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) return true;  // cannot ask: never call memory freed that may not be
        struct stat st {};
        if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_ino) != x.st_ino) {
            ::close(fd);
            return true;
        }
    }
    pollfd p{fd, 0, 0};
    const bool closed = ::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
    if (fd != x.read_fd) ::close(fd);
    return !closed;
}

bool SimNode::maybe_free(std::uint64_t id) {
    const std::uint32_t s = alloc_slot(id);
    if (s == kNodeAllocations) return true;
    NodeAlloc& a = seg_->alloc[s];
    if (a.users != 0) return false;
    for (std::uint32_t e = 0; e < seg_->exp_high; ++e)
        if (seg_->exp[e].alloc == id && export_open(e)) return false;
    for (std::uint32_t e = 0; e < seg_->exp_high; ++e) {
        NodeExport& x = seg_->exp[e];
        if (x.alloc != id || x.pid != pid_) continue;  // others' records go when their exporter reaps them
        ::close(x.read_fd);
        x = NodeExport{};
    }
    if (a.device >= 0) seg_->used[a.device] -= a.size;
    a = NodeAlloc{};
    // A multicast object's binds end with it, and so may the memory only they pinned.
    for (std::uint32_t b = 0; b < seg_->bind_high; ++b)
        if (seg_->binds[b].mc == id) drop_bind(b);
    return true;
}

bool SimNode::add_export(std::uint64_t id, int read_fd, std::uint64_t st_dev, std::uint64_t st_ino) {
    for (std::uint32_t e = 0; e < kNodeExports; ++e) {
        if (seg_->exp[e].alloc != 0) continue;
        seg_->exp[e] = NodeExport{id, pid_, read_fd, st_dev, st_ino};
        seg_->exp_high = std::max(seg_->exp_high, e + 1);
        return true;
    }
    return false;
}

std::uint64_t SimNode::export_lookup(std::uint64_t st_dev, std::uint64_t st_ino) const {
    for (std::uint32_t e = 0; e < seg_->exp_high; ++e)
        if (const NodeExport& x = seg_->exp[e]; x.alloc != 0 && x.st_dev == st_dev && x.st_ino == st_ino && alive(x.alloc)) return x.alloc;
    return 0;
}

void SimNode::reap_exports() {
    for (std::uint32_t e = 0; e < seg_->exp_high; ++e) {
        NodeExport& x = seg_->exp[e];
        if (x.alloc == 0 || x.pid != pid_) continue;
        const std::uint64_t id = x.alloc;
        if (alive(id) && export_open(e)) continue;
        ::close(x.read_fd);
        x = NodeExport{};
        maybe_free(id);
    }
}

}  // namespace cumemaudit::sim
