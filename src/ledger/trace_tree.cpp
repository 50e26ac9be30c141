// Sharded interning of (parent, pc) nodes. A TraceId carries its shard in the low bits, so frames() walks
// a stack taking only the lock of the shard each node lives in, and interning threads with different stacks
// rarely contend.
#include "trace_tree.hpp"

#include <array>
#include <deque>
#include <mutex>
#include <unordered_map>

namespace cumemaudit::ledger {
namespace {

constexpr unsigned kShardBits = 4;
constexpr std::uint32_t kShards = 1u << kShardBits;

struct Node {
    TraceId parent;
    Pc pc;
};

struct NodeKey {
    TraceId parent;
    Pc pc;
    friend bool operator==(const NodeKey&, const NodeKey&) = default;
};

struct NodeKeyHash {
    std::size_t operator()(const NodeKey& k) const noexcept {
        return static_cast<std::size_t>((k.pc ^ (std::uint64_t{k.parent} << 32 | k.parent)) * 0x9E3779B97F4A7C15ull);
    }
};

std::uint32_t shard_of(const NodeKey& k) { return static_cast<std::uint32_t>(NodeKeyHash{}(k) >> 60) % kShards; }

}  // namespace

struct TraceTree::Impl {
    struct Shard {
        mutable std::mutex mu;
        std::unordered_map<NodeKey, TraceId, NodeKeyHash> index;
        std::deque<Node> nodes;  // deque: stable while other threads append
    };
    std::array<Shard, kShards> shards;

    // id = (index in shard + 1) << kShardBits | shard, so 0 stays the empty trace.
    static TraceId make_id(std::uint32_t shard, std::size_t index) {
        return static_cast<TraceId>(((index + 1) << kShardBits) | shard);
    }
    Node node(TraceId id) const {
        const Shard& s = shards[id & (kShards - 1)];
        std::lock_guard lock(s.mu);
        return s.nodes[(id >> kShardBits) - 1];
    }
};

TraceTree::TraceTree() : impl_(std::make_unique<Impl>()) {}
TraceTree::~TraceTree() = default;

TraceId TraceTree::intern(std::span<const Pc> pcs) {
    TraceId parent = 0;
    // Outermost first, so stacks sharing callers share nodes.
    for (auto it = pcs.rbegin(); it != pcs.rend(); ++it) {
        const NodeKey key{parent, *it};
        const std::uint32_t si = shard_of(key);
        auto& s = impl_->shards[si];
        std::lock_guard lock(s.mu);
        auto [pos, inserted] = s.index.try_emplace(key, 0);
        if (inserted) {
            s.nodes.push_back(Node{parent, *it});
            pos->second = Impl::make_id(si, s.nodes.size() - 1);
        }
        parent = pos->second;
    }
    return parent;
}

std::vector<Pc> TraceTree::frames(TraceId id) const {
    std::vector<Pc> out;
    while (id != 0) {
        const Node n = impl_->node(id);
        out.push_back(n.pc);
        id = n.parent;
    }
    return out;
}

std::size_t TraceTree::size() const {
    std::size_t n = 0;
    for (const auto& s : impl_->shards) {
        std::lock_guard lock(s.mu);
        n += s.nodes.size();
    }
    return n;
}

void TraceTree::reset() {
    for (auto& s : impl_->shards) {
        std::lock_guard lock(s.mu);
        s.index.clear();
        s.nodes.clear();
    }
}

}  // namespace cumemaudit::ledger
