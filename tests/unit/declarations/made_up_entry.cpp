// A made-up entry point, cuMadeUp(CUdeviceptr* out, size_t bytes), declared as a new row would be and
// wrapped by the real wrapper template. Built once per CASE by test_declarations.py: CASE 0 is a correct
// declaration and must compile; every other case forgets or contradicts one part of it and must not.
#include "shim/boundary/wrapper.hpp"

namespace cumemaudit::shim {
namespace ev {
using namespace declaration_terms;
//                                  class    order           requested            enforce          oom       prepare     record
#if CASE == 0 || CASE == 3
CUMEMAUDIT_DECLARE_EVENT(MadeUp,    classic, begins_out(0),  argument(1),         reclaims_first,  refusals, no_prepare, records)
#elif CASE == 1  // a column left out
CUMEMAUDIT_DECLARE_EVENT(MadeUp,    classic, begins_out(0),  argument(1),         reclaims_first,  refusals, no_prepare)
#elif CASE == 2  // records, but no record() of these parameters
CUMEMAUDIT_DECLARE_EVENT(MadeUp,    classic, begins_out(0),  argument(1),         reclaims_first,  refusals, no_prepare, records)
#elif CASE == 4  // translates, but no enforce_before()
CUMEMAUDIT_DECLARE_EVENT(MadeUp,    classic, begins_out(0),  argument(1),         translates,      refusals, no_prepare, records)
#elif CASE == 5  // follows up, but no enforce_after()
CUMEMAUDIT_DECLARE_EVENT(MadeUp,    classic, begins_out(0),  argument(1),         follows_up,      refusals, no_prepare, records)
#elif CASE == 6  // watches refusals of something that is not an allocation
CUMEMAUDIT_DECLARE_EVENT(MadeUp,    classic, begins_out(0),  not_an_allocation,   reclaims_first,  refusals, no_prepare, records)
#elif CASE == 7  // ends the life of argument 0, which is an out-pointer, not a value
CUMEMAUDIT_DECLARE_EVENT(MadeUp,    classic, ends_held(0),   argument(1),         reclaims_first,  refusals, no_prepare, records)
#elif CASE == 8  // reads the requested bytes from the out-pointer
CUMEMAUDIT_DECLARE_EVENT(MadeUp,    classic, begins_out(0),  argument(0),         reclaims_first,  refusals, no_prepare, records)
#elif CASE == 9  // prepares, but no prepare()
CUMEMAUDIT_DECLARE_EVENT(MadeUp,    classic, begins_out(0),  argument(1),         reclaims_first,  refusals, prepares,   records)
#elif CASE == 10  // an order on an argument that does not exist
CUMEMAUDIT_DECLARE_EVENT(MadeUp,    classic, begins_out(2),  argument(1),         reclaims_first,  refusals, no_prepare, records)
#elif CASE == 11  // the hook row names an event that has no row
#endif
}  // namespace ev

#if CASE != 2 && CASE != 11
// What the event tells the ledger: here, nothing.
inline void record(ev::MadeUp, Call&, CUresult, CUdeviceptr*, size_t) {}
#endif
#if CASE == 3  // a record() the row does not promise
namespace ev {
CUMEMAUDIT_DECLARE_EVENT(MadeUpQuiet, classic, begins_out(0), argument(1), reclaims_first, refusals, no_prepare, no_record)
}
inline void record(ev::MadeUpQuiet, Call&, CUresult, CUdeviceptr*, size_t) {}
#endif

}  // namespace cumemaudit::shim

// The hook row: the wrapper of cuMadeUp, forwarding to the real entry point of any row (never called).
extern "C" CUresult cuMadeUp(CUdeviceptr* out, size_t bytes) {
    using namespace cumemaudit::shim;
#if CASE == 3
    using Event = ev::MadeUpQuiet;
#elif CASE == 11
    using Event = ev::NoSuchEvent;
#else
    using Event = ev::MadeUp;
#endif
    return DriverHook<HookId::cuMemAlloc_v2, Event, CUresult(CUdeviceptr*, size_t)>::call("cuMadeUp", nullptr, out, bytes);
}
