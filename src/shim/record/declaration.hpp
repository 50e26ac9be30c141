// declaration: the words an entry point's behaviour is declared in, one row per event in events.inc. A
// wrapper (boundary/wrapper.hpp) and the CUPTI backend derive everything they do around the driver call
// from the row (record/entry_point.hpp): the site's depth, the order between threads, the bytes an OOM
// record names, enforce mode's part, the OOM watch and the ledger event. A row is positional, so a column
// left out does not compile; a row that disagrees with the functions it names fails a static_assert.
#pragma once

#include <cstdint>

namespace cumemaudit::shim {

// VMM calls are rare and slow, so their sites get the deep native stack and the Python frames by default;
// classic calls are frequent and cheap, so theirs keep one return address unless asked. A watched call (a
// kernel launch) is the most frequent of all: its wrapper looks its handle up (a kernel's first launch is
// measured, record/first_launches.hpp) and compares the driver's answer with success, and only a refusal that
// may be for lack of memory is recorded, with the deep stack.
enum class CallClass : std::uint8_t { classic, vmm, watched };

// A call's part in the life of the value it names (a pointer, a handle). The driver hands a freed value out
// again at once, so "A frees p, B allocates p" must reach the ledger in that order (order_stripe.hpp).
struct Order {
    enum Role : std::uint8_t {
        none,
        begins_out,   // the value its argument `arg` points to begins a life (on success): wait for its stripe
        begins_in,    // the value of argument `arg` begins a life (a map at an address): wait for its stripe
        ends_held,    // the value of argument `arg` ends a life: hold its stripe across the driver call and record
        ends_ticket,  // a classic free of argument `arg`: take its record's ticket before the driver runs
    };
    Role role = none;
    int arg = -1;
};

// The bytes an allocation asked for, as its OOM record names them.
struct Bytes {
    enum Rule : std::uint8_t {
        not_an_allocation,  // makes no OOM record
        argument,           // argument `a`
        product,            // argument `a` times argument `b` (a pitched allocation: width × height)
        unsized,            // an allocation whose size the call does not name (an IPC import, a graph)
        described,          // the texels of the array descriptor at argument `a`, over the mipmap levels
                            // argument `b` counts (-1: one level)
        stack_limit,        // a limit set: the stack reservation argument `b` (the value) would add when
                            // argument `a` (the limit) is CU_LIMIT_STACK_SIZE
    };
    Rule rule = not_an_allocation;
    int a = -1, b = -1;
};

// Enforce mode's part, flags.
enum Enforce : std::uint8_t {
    no_enforce = 0,
    reclaims_first = 1,  // the calling thread's pending reclaims run before the driver (allocations, free memory)
    translates = 2,      // enforce_before(): virtual handles in the arguments become real ones, or it answers alone
    follows_up = 4,      // enforce_after(): virtual handles handed out, released ones retired, freed ranges noted
};
constexpr Enforce operator|(Enforce a, Enforce b) { return static_cast<Enforce>(unsigned{a} | unsigned{b}); }

// The out-of-memory watch: a refusal for lack of memory makes an OOM record (and the report is written
// then), and a later success of the same request marks it recovered.
enum class OomWatch : std::uint8_t { none, refusals };

struct Declaration {
    CallClass call_class;
    Order order;
    Bytes requested;
    Enforce enforce;
    OomWatch oom;
    bool prepares;  // prepare(): looks at the world before the driver runs (a graph's price: memory before)
    bool records;   // record(): the ledger, timeline or graph event it makes after the driver answered
};

// The terms rows are written in (events.inc): `begins_out(0)`, `argument(1)`, `reclaims_first | follows_up`.
namespace declaration_terms {
inline constexpr CallClass classic = CallClass::classic, vmm = CallClass::vmm, watched = CallClass::watched;
inline constexpr Order no_order{};
constexpr Order begins_out(int arg) { return {Order::begins_out, arg}; }
constexpr Order begins_in(int arg) { return {Order::begins_in, arg}; }
constexpr Order ends_held(int arg) { return {Order::ends_held, arg}; }
constexpr Order ends_ticket(int arg) { return {Order::ends_ticket, arg}; }
inline constexpr Bytes not_an_allocation{};
constexpr Bytes argument(int a) { return {Bytes::argument, a}; }
constexpr Bytes product(int a, int b) { return {Bytes::product, a, b}; }
inline constexpr Bytes unsized{Bytes::unsized};
constexpr Bytes described(int a, int levels = -1) { return {Bytes::described, a, levels}; }
constexpr Bytes stack_limit(int limit, int value) { return {Bytes::stack_limit, limit, value}; }
using enum Enforce;
inline constexpr OomWatch no_watch = OomWatch::none, refusals = OomWatch::refusals;
inline constexpr bool prepares = true, no_prepare = false, records = true, no_record = false;
}  // namespace declaration_terms

// One event type per row: `struct Create { static constexpr Declaration declared{...}; }` in namespace ev.
// A test may declare an event of its own the same way.
#define CUMEMAUDIT_DECLARE_EVENT(name, call_class, order, requested, enforce, oom, prepare, record) \
    struct name {                                                                                    \
        static constexpr ::cumemaudit::shim::Declaration declared{call_class, order, requested,     \
                                                                   enforce, oom, prepare, record};  \
    };

}  // namespace cumemaudit::shim
