// The simulated node's shared state (src/simdriver/node.hpp): fork children attach to the same node name
// and must see one capacity, one set of allocations, and lose what they held when they die.
#include "simdriver/node.hpp"

#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

using cumemaudit::sim::Config;
using cumemaudit::sim::SimNode;

namespace {

constexpr std::uint64_t MiB = 1ull << 20;

struct NodeName {
    std::string name = "unit-" + std::to_string(::getpid()) + "-" + std::to_string(::time(nullptr));
    ~NodeName() { ::shm_unlink(("/cumemaudit-sim-" + name).c_str()); }
};

std::unique_ptr<SimNode> attach(const std::string& name, std::uint64_t memory = 64 * MiB) {
    Config c;
    c.memory_per_device = memory;
    c.devices = 2;
    std::string err;
    auto n = SimNode::open(name.c_str(), c, err);
    if (!n) FAIL(err);
    return n;
}

CUmemAllocationProp fabric_prop() {
    CUmemAllocationProp p{};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
    return p;
}

// Runs `body` in a fork child attached afresh to the node; returns its exit status.
template <class F> int in_child(F body) {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(body());
    int st = 0;
    ::waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::uint64_t used(SimNode& n, int dev = 0) {
    SimNode::Lock l(n);
    return n.used(dev);
}

}  // namespace

TEST_CASE("a node's first process sets its shape; others share capacity") {
    NodeName node;
    auto n = attach(node.name, 64 * MiB);
    const std::uint64_t nonce[4] = {1, 2, 3, 4};
    std::uint64_t id = 0;
    {
        SimNode::Lock l(*n);
        REQUIRE(n->create(0, 48 * MiB, fabric_prop(), nonce, &id) == SimNode::CreateResult::ok);
    }
    // A child with another config sees the node's, and only 16 MiB free on device 0.
    CHECK(in_child([&] {
              auto c = attach(node.name, 1024 * MiB);
              SimNode::Lock l(*c);
              std::uint64_t other = 0;
              if (c->config().memory_per_device != 64 * MiB) return 1;
              if (c->create(0, 32 * MiB, fabric_prop(), nonce, &other) != SimNode::CreateResult::out_of_memory) return 2;
              if (!c->charge_classic(1, 8 * MiB)) return 3;  // returned when the child is gone
              if (c->va_slice() == 0) return 4;
              return 0;
          }) == 0);
    CHECK(used(*n, 1) == 0);  // the dead child's classic bytes came back
    CHECK(used(*n, 0) == 48 * MiB);
}

TEST_CASE("an import from another process keeps memory alive until that process is gone") {
    NodeName node;
    auto n = attach(node.name);
    const std::uint64_t nonce[4] = {9, 9, 9, 9};
    std::uint64_t id = 0;
    {
        SimNode::Lock l(*n);
        REQUIRE(n->create(0, 16 * MiB, fabric_prop(), nonce, &id) == SimNode::CreateResult::ok);
    }
    int ready[2], go[2];
    REQUIRE(::pipe(ready) == 0);
    REQUIRE(::pipe(go) == 0);
    const pid_t child = ::fork();
    if (child == 0) {
        auto c = attach(node.name);
        {
            SimNode::Lock l(*c);
            if (!c->nonce_matches(id, nonce) || !c->add_use(id, 1, 1)) ::_exit(1);  // import and map
        }
        char x = 1;
        (void)!::write(ready[1], &x, 1);
        (void)!::read(go[0], &x, 1);  // hold it until killed
        ::_exit(0);
    }
    char x = 0;
    REQUIRE(::read(ready[0], &x, 1) == 1);
    {
        SimNode::Lock l(*n);
        n->add_use(id, -1, 0);  // the creator releases: the child's import and mapping still hold it
        CHECK_FALSE(n->maybe_free(id));
        CHECK(n->alive(id));
    }
    CHECK(used(*n) == 16 * MiB);
    ::kill(child, SIGKILL);
    int st = 0;
    ::waitpid(child, &st, 0);
    CHECK(used(*n) == 0);  // reaped at the next lock: the driver drops a dead process's references
    SimNode::Lock l(*n);
    CHECK_FALSE(n->alive(id));
}

TEST_CASE("device addresses of a node's processes never collide") {
    NodeName node;
    auto n = attach(node.name);
    const std::uint64_t mine = n->va_slice();
    REQUIRE(mine != 0);
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    CHECK(in_child([&] {
              auto c = attach(node.name);
              const std::uint64_t theirs = c->va_slice();
              return ::write(fds[1], &theirs, sizeof theirs) == sizeof theirs ? 0 : 1;
          }) == 0);
    std::uint64_t theirs = 0;
    REQUIRE(::read(fds[0], &theirs, sizeof theirs) == sizeof theirs);
    CHECK(theirs != 0);
    CHECK((theirs >= mine + cumemaudit::sim::kNodeVaSlice || theirs + cumemaudit::sim::kNodeVaSlice <= mine));
}

TEST_CASE("a private node is not shared") {
    std::string err;
    auto a = SimNode::open(nullptr, Config{}, err);
    REQUIRE(a);
    CHECK_FALSE(a->shared());
    CHECK(a->va_slice() == 0);
}
