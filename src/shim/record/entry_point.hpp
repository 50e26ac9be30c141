// entry_point: what a call does around the driver, derived from its event's row in events.inc and nothing
// else. The wrapper (boundary/wrapper.hpp) and the CUPTI backend both go through Declared<Event, Params...>,
// so the two record alike. Declared also checks the row against the functions it names: a row that
// promises a record(), prepare(), enforce_before() or enforce_after() that does not match the entry point's
// parameters, or has one it does not promise, does not compile; nor does an order or a size read from an
// argument of the wrong type.
#pragma once

#include "shim/record/call.hpp"
#include "shim/record/enforce.hpp"
#include "shim/record/events.hpp"
#include "shim/record/oom_watch.hpp"
#include "shim/record/order_stripe.hpp"
#include "shim/record/recorder.hpp"

#include <concepts>
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>

namespace cumemaudit::shim {

// A classic free's order: its record's ticket, taken before the driver runs (Call::free_ticket). Here and
// inline: every free's path, which link-time optimization did not inline from events.cpp.
inline void take_free_ticket(Call& call, std::uint64_t ptr) {
    if (ptr != 0) call.free_ticket = call.recorder().ledger().freeing(ptr);
}

template <typename Event, typename... A>
struct Declared {
    static constexpr Declaration d = Event::declared;
    static constexpr int kParams = static_cast<int>(sizeof...(A));
    template <int I>
    using Param = std::tuple_element_t<static_cast<std::size_t>(I), std::tuple<A...>>;

    static constexpr bool has_record = requires(Call& c, CUresult r, A... a) { record(Event{}, c, r, a...); };
    static constexpr bool has_prepare = requires(Call& c, A... a) { prepare(Event{}, c, a...); };
    static constexpr bool has_translation = requires(Call& c, A&... a) { enforce_before(Event{}, c, a...); };
    static constexpr bool has_follow_up = requires(Call& c, CUresult r, A... a) { enforce_after(Event{}, c, r, a...); };

    static_assert(d.records == has_record,
                  "events.inc: the row's record column disagrees with the record() overloads for these parameters");
    static_assert(d.prepares == has_prepare,
                  "events.inc: the row's prepare column disagrees with the prepare() overloads for these parameters");
    static_assert(((d.enforce & translates) != 0) == has_translation,
                  "events.inc: the row's enforce column (translates) disagrees with the enforce_before() overloads");
    static_assert(((d.enforce & follows_up) != 0) == has_follow_up,
                  "events.inc: the row's enforce column (follows_up) disagrees with the enforce_after() overloads");
    static_assert(d.oom == OomWatch::none || d.requested.rule != Bytes::not_an_allocation,
                  "events.inc: a row that watches refusals must say what bytes were requested");

    // Whether argument I exists and is a size or handle (integral), or also an address (value_at).
    template <int I>
    static constexpr bool integral_at() {
        if constexpr (I >= 0 && I < kParams) return std::is_integral_v<Param<I>>;
        else return false;
    }
    template <int I>
    static constexpr bool value_at() {
        if constexpr (I >= 0 && I < kParams) return std::is_integral_v<Param<I>> || std::is_pointer_v<Param<I>>;
        else return false;
    }
    template <int I>
    static constexpr bool out_value_at() {
        if constexpr (I >= 0 && I < kParams)
            return std::is_pointer_v<Param<I>> && std::is_integral_v<std::remove_pointer_t<Param<I>>>;
        else return false;
    }
    static constexpr bool order_fits = [] {
        if constexpr (d.order.role == Order::none) return true;
        else if constexpr (d.order.role == Order::begins_out) return out_value_at<d.order.arg>();
        else if constexpr (d.order.role == Order::ends_ticket) return value_at<d.order.arg>();
        else return integral_at<d.order.arg>();
    }();
    static_assert(order_fits, "events.inc: the row's order names an argument of the wrong type (begins_out: a "
                              "pointer to a handle or address; ends_ticket: a pointer or address; else a value)");
    static constexpr bool bytes_fit = [] {
        if constexpr (d.requested.rule == Bytes::argument) return integral_at<d.requested.a>();
        else if constexpr (d.requested.rule == Bytes::product) return integral_at<d.requested.a>() && integral_at<d.requested.b>();
        else if constexpr (d.requested.rule == Bytes::described)
            return value_at<d.requested.a>() && (d.requested.b < 0 || integral_at<d.requested.b>());
        else if constexpr (d.requested.rule == Bytes::stack_limit)
            return std::is_same_v<Param<d.requested.a>, CUlimit> && integral_at<d.requested.b>();
        else return true;
    }();
    static_assert(d.call_class != CallClass::watched || (d.order.role == Order::none && d.enforce == no_enforce &&
                                                         d.oom == OomWatch::none && d.records),
                  "events.inc: a watched row records its out-of-memory answers and does nothing else");
    static constexpr bool has_first_use = requires(A... a) { { first_use(Event{}, a...) } -> std::same_as<bool>; };
    static_assert(d.call_class != CallClass::watched || d.prepares == has_first_use,
                  "events.inc: a watched row prepares exactly when first_use() says which of its calls is a first use");

    // A watched call goes the whole way (prepare, driver, record) only when it is the first use of what it
    // names, said by first_use(); any other is one compare on the way back.
    static bool is_first_use(A... a) noexcept {
        if constexpr (has_first_use) return first_use(Event{}, a...);
        else return false;
    }
    static_assert(bytes_fit, "events.inc: the row's requested bytes name an argument that is not a size");

    template <int I>
    static std::uint64_t value(A... a) {
        const auto v = std::get<I>(std::forward_as_tuple(a...));
        if constexpr (std::is_pointer_v<decltype(v)>) return reinterpret_cast<std::uintptr_t>(v);
        else return static_cast<std::uint64_t>(v);
    }

    // Whether before_driver does anything: an allocation's row (its order begins after the driver) has the
    // wrapper skip that phase and its scope unless enforce mode asks for its part.
    static constexpr bool acts_before =
        d.prepares || d.order.role == Order::ends_held || d.order.role == Order::ends_ticket;

    // Before the driver call: enforce mode's part (an answer here means the driver is not called), then the
    // call's order (a stripe held across the driver call and the record, or a free's ticket) and what the
    // call prepares.
    static std::optional<CUresult> enforce_first(Call& call, A&... a) {
        if constexpr ((d.enforce & reclaims_first) != 0) reclaim_pending(call.recorder(), false);
        if constexpr ((d.enforce & translates) != 0) return enforce_before(Event{}, call, a...);
        return std::nullopt;
    }
    static auto before_driver(Call& call, A... a) {
        if constexpr (d.prepares) prepare(Event{}, call, a...);
        if constexpr (d.order.role == Order::ends_held) {
            return hold_order(value<d.order.arg>(a...));
        } else {
            if constexpr (d.order.role == Order::ends_ticket) take_free_ticket(call, value<d.order.arg>(a...));
            return NoHold{};
        }
    }

    // After the driver answered: a value that begins a life waits for the end of its last one, then the
    // event is recorded. The CUPTI backend calls only this.
    static void record_answer(Call& call, CUresult r, A... a) {
        if constexpr (d.order.role == Order::begins_out) {
            const auto* out = std::get<d.order.arg>(std::forward_as_tuple(a...));
            if (r == CUDA_SUCCESS && out != nullptr) wait_for_order(static_cast<std::uint64_t>(*out));
        } else if constexpr (d.order.role == Order::begins_in) {
            wait_for_order(value<d.order.arg>(a...));
        }
        if constexpr (d.records) record(Event{}, call, r, a...);
    }

    // The bytes the call asked for, as its row reads them.
    static std::uint64_t requested(A... a) {
        if constexpr (d.requested.rule == Bytes::argument) return value<d.requested.a>(a...);
        else if constexpr (d.requested.rule == Bytes::product) return value<d.requested.a>(a...) * value<d.requested.b>(a...);
        else if constexpr (d.requested.rule == Bytes::described) {
            unsigned levels = 1;
            if constexpr (d.requested.b >= 0) levels = static_cast<unsigned>(value<d.requested.b>(a...));
            return described_bytes(std::get<d.requested.a>(std::forward_as_tuple(a...)), levels);
        } else if constexpr (d.requested.rule == Bytes::stack_limit) {
            return stack_growth_bytes(std::get<d.requested.a>(std::forward_as_tuple(a...)), value<d.requested.b>(a...));
        } else return 0;
    }

    // After the record: a refusal for lack of memory makes an OOM record (true: the report is due now); a
    // success while records wait for their retry may recover one. Decided at compile time: a call whose
    // row watches nothing never reads the OOM counter's line.
    static bool watch_oom(Call& call, CUresult r, A... a) {
        if constexpr (d.oom == OomWatch::none) {
            return false;
        } else {
            if (r == CUDA_ERROR_OUT_OF_MEMORY) return out_of_memory(call, r, requested(a...));
            if (r == CUDA_SUCCESS && call.recorder().hot().oom_waiting.load(std::memory_order_relaxed) > 0)
                allocation_succeeded(call, requested(a...));
            return false;
        }
    }

    static void enforce_last(Call& call, CUresult r, A... a) {
        if constexpr ((d.enforce & follows_up) != 0) enforce_after(Event{}, call, r, a...);
    }
};

}  // namespace cumemaudit::shim
