#include "shim/record/pc_cache.hpp"

#include "shim/record/recorder.hpp"
#include "shim/services/owner_rules.hpp"
#include "shim/services/thread_state.hpp"

#include "common/object_roles.hpp"

#include "common/user_frame.hpp"
#include "ledger/python_frames.hpp"

#include <pthread.h>

#include <algorithm>
#include <array>
#include <optional>

namespace cumemaudit::shim {


namespace {

void free_at_thread_exit();

PcFacts& facts(ledger::Pc pc) {
    ThreadState& t = thread_state();
    // On the heap, one per thread: in the TLS block itself it would overflow the static TLS a dlopen() may get.
    if (t.pcs == nullptr) {
        t.pcs = new PcFacts[kPcEntries]();
        free_at_thread_exit();
    }
    PcFacts& e = t.pcs[pc_slot(pc)];
    if (e.pc != pc) e = PcFacts{.pc = pc};
    return e;
}

void learn_object(PcFacts& e, Recorder* rec) {
    std::string function;
    const std::string object = object_of(e.pc, &function);
    e.passes_on = object_roles::passes_on(object) || object_roles::passes_on_function(function);
    e.binds = object_roles::is_python_binding(object);
    if (rec != nullptr && !e.passes_on) {
        e.owner = rec->ledger().owner_id(owner_name_for_object(object));
        e.owner_known = true;
    }
}

// `e` with the ids of `rec`: a fresh recorder (a fork child's) has its own.
PcFacts& current(PcFacts& e, const Recorder& rec) {
    if (e.generation != rec.generation()) {
        e.generation = rec.generation();
        e.trace = 0;
        e.owner_known = false;
    }
    return e;
}

// The owner `e`'s object names, or nullopt when it passes memory on.
std::optional<ledger::OwnerId> owner_at(PcFacts& e, Recorder& rec) {
    if (e.passes_on < 0 || (!e.passes_on && !e.owner_known)) learn_object(e, &rec);
    if (e.passes_on) return std::nullopt;
    return e.owner;
}

}  // namespace

ledger::Site one_frame_site(Recorder& rec, const char* api, ledger::Pc pc, bool* binding) {
    PcFacts& e = current(facts(pc), rec);  // one entry for the trace and the owner
    if (e.trace == 0) {
        const ledger::Pc one[1] = {pc};
        e.trace = rec.ledger().traces().intern(one);
    }
    const ledger::Site site{api, e.trace, owner_at(e, rec).value_or(0)};  // learns the object once
    if (binding != nullptr) *binding = e.binds;
    return site;
}

ledger::OwnerId owner_of(Recorder& rec, std::span<const ledger::Pc> frames, std::size_t native) {
    // Frames past the first binding are the interpreter's own callers (its main, libc's start, an embedding
    // program): they never own what Python code allocated, so the walk stops there.
    std::optional<ledger::OwnerId> binding;  // that binding's own name, for a stack with no Python frames
    for (const ledger::Pc pc : frames.first(native)) {
        PcFacts& e = current(facts(pc), rec);
        const auto owner = owner_at(e, rec);
        if (!owner) continue;
        if (!e.binds) return *owner;
        binding = owner;
        break;
    }
    // Only bindings between the driver and Python: the Python code a person names owns it, named by the same
    // rules as an object, from its file ("<string>" and frozen modules name no file: the next frame out).
    std::vector<std::string> files;
    for (const ledger::Pc pc : frames.subspan(native)) files.push_back(rec.ledger().python_frames().frame(pc).file);
    if (files.empty()) return binding.value_or(0);
    const std::vector<std::string_view> views(files.begin(), files.end());
    for (std::size_t i = user_frame::pick(views, rec.skip_frames()); i < files.size(); ++i)
        if (!files[i].empty() && files[i].front() != '<') return rec.ledger().owner_id(owner_name_for_object(files[i]));
    return binding.value_or(0);
}

// One deep stack seen on this thread: its frames, and the trace and owner they intern to in the ledger of
// the recorder whose generation it carries. Longer stacks are not kept (they go to the tree every time).
constexpr std::size_t kStackFrames = 48, kStackEntries = 32;  // direct-mapped, 13 KiB a thread that needs it
struct StackFacts {
    std::uint64_t generation = 0;
    std::uint64_t hash = 0;
    std::uint32_t n = 0;
    ledger::TraceId trace = 0;
    ledger::OwnerId owner = 0;
    std::array<ledger::Pc, kStackFrames> pcs{};
};

namespace {

// The calling thread's caches are freed at its exit, through a pthread key's destructor (initial-exec TLS
// runs no destructor of its own). The key is set when the thread makes its first cache.
void free_thread_caches(void*) {
    ThreadState& t = thread_state();
    delete[] t.pcs;
    t.pcs = nullptr;
    delete[] t.stacks;
    t.stacks = nullptr;
}

void free_at_thread_exit() {
    static pthread_key_t key;
    static const bool made = pthread_key_create(&key, free_thread_caches) == 0;
    if (made) pthread_setspecific(key, &thread_state());
}

std::uint64_t hash_of(std::span<const ledger::Pc> frames) {
    std::uint64_t h = frames.size();
    for (const ledger::Pc pc : frames) h = (h ^ pc) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

}  // namespace

ledger::Site deep_site(Recorder& rec, const char* api, std::span<const ledger::Pc> frames, std::size_t native) {
    ledger::Ledger& book = rec.ledger();
    auto intern = [&] { return ledger::Site{api, book.traces().intern(frames), owner_of(rec, frames, native)}; };
    if (frames.size() > kStackFrames) return intern();
    ThreadState& t = thread_state();
    if (t.stacks == nullptr) {
        t.stacks = new StackFacts[kStackEntries]();
        free_at_thread_exit();
    }
    const std::uint64_t h = hash_of(frames);
    StackFacts& e = t.stacks[h % kStackEntries];
    if (e.generation == rec.generation() && e.hash == h && e.n == frames.size() &&
        std::equal(frames.begin(), frames.end(), e.pcs.begin()))
        return ledger::Site{api, e.trace, e.owner};
    const ledger::Site site = intern();
    e.generation = rec.generation();
    e.hash = h;
    e.n = static_cast<std::uint32_t>(frames.size());
    e.trace = site.trace;
    e.owner = site.owner;
    std::copy(frames.begin(), frames.end(), e.pcs.begin());
    return site;
}

bool passes_on(ledger::Pc pc) {
    PcFacts& e = facts(pc);
    if (e.passes_on < 0) learn_object(e, nullptr);
    return e.passes_on != 0;
}

}  // namespace cumemaudit::shim
