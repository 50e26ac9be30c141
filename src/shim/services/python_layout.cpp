#include "shim/services/python_layout.hpp"

#include "shim/services/safe_read.hpp"

#include <cstring>

namespace cumemaudit::shim {
namespace {

// Offsets read off each version's Include/internal headers (x86-64 and aarch64 Linux, default build).
// Identical across a minor version's bugfix releases: those keep the internal ABI.
constexpr PythonLayout k311 = {
    .minor = 11,
    .ts_next = 8, .ts_interp = 16, .ts_thread_id = 152,
    .via_cframe = true, .ts_cframe = 56, .cframe_current_frame = 8, .ts_current_frame = 0,
    .frame_previous = 48, .frame_code = 32, .frame_instr = 56, .frame_owner = 69, .owner_cstack = -1,
    .code_filename = 112, .code_qualname = 128, .code_linetable = 136, .code_firstlineno = 72, .code_adaptive = 184,
    .interp_next = 0, .interp_threads_head = 16, .runtime_interpreters_head = 40,
    .ob_type = 8, .str_length = 16, .str_state = 32, .ascii_size = 48, .compact_size = 72, .bytes_size = 16,
    .bytes_sval = 32,
};
constexpr PythonLayout k312 = {
    .minor = 12,
    .ts_next = 8, .ts_interp = 16, .ts_thread_id = 136,
    .via_cframe = true, .ts_cframe = 56, .cframe_current_frame = 0, .ts_current_frame = 0,
    .frame_previous = 8, .frame_code = 0, .frame_instr = 56, .frame_owner = 70, .owner_cstack = 3,
    .code_filename = 112, .code_qualname = 128, .code_linetable = 136, .code_firstlineno = 68, .code_adaptive = 192,
    .interp_next = 0, .interp_threads_head = 72, .runtime_interpreters_head = 40,
    .ob_type = 8, .str_length = 16, .str_state = 32, .ascii_size = 40, .compact_size = 56, .bytes_size = 16,
    .bytes_sval = 32,
};

// The head of 3.13's _Py_DebugOffsets (Include/internal/pycore_runtime.h), up to the fields used here.
struct DebugOffsets313 {
    char cookie[8];  // "xdebugpy"
    std::uint64_t version, free_threaded;
    struct { std::uint64_t size, finalizing, interpreters_head; } runtime_state;
    struct {
        std::uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins, ceval_gil,
            gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked, gil_runtime_state_holder;
    } interpreter_state;
    struct {
        std::uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk, status;
    } thread_state;
    struct { std::uint64_t size, previous, executable, instr_ptr, localsplus, owner; } interpreter_frame;
    struct {
        std::uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
            localspluskinds, co_code_adaptive;
    } code_object;
    struct { std::uint64_t size, ob_type; } pyobject;
    struct { std::uint64_t size, tp_name, tp_repr, tp_flags; } type_object;
    struct { std::uint64_t size, ob_item, ob_size; } tuple_object;
    struct { std::uint64_t size, ob_item, ob_size; } list_object;
    struct { std::uint64_t size, ma_keys, ma_values; } dict_object;
    struct { std::uint64_t size, ob_fval; } float_object;
    struct { std::uint64_t size, lv_tag, ob_digit; } long_object;
    struct { std::uint64_t size, ob_size, ob_sval; } bytes_object;
    struct { std::uint64_t size, state, length, asciiobject_size; } unicode_object;
};

std::optional<PythonLayout> from_debug_offsets_313(std::uintptr_t runtime) {
    DebugOffsets313 d;
    if (!safe_load(runtime, d) || std::memcmp(d.cookie, "xdebugpy", 8) != 0) return std::nullopt;
    if ((d.version >> 16) != 0x030D || d.free_threaded != 0) return std::nullopt;
    PythonLayout l{};
    l.minor = 13;
    l.ts_next = d.thread_state.next;
    l.ts_interp = d.thread_state.interp;
    l.ts_thread_id = d.thread_state.thread_id;
    l.via_cframe = false;
    l.ts_current_frame = d.thread_state.current_frame;
    l.frame_previous = d.interpreter_frame.previous;
    l.frame_code = d.interpreter_frame.executable;
    l.frame_instr = d.interpreter_frame.instr_ptr;
    l.frame_owner = d.interpreter_frame.owner;
    l.owner_cstack = 3;  // FRAME_OWNED_BY_CSTACK
    l.code_filename = d.code_object.filename;
    l.code_qualname = d.code_object.qualname;
    l.code_linetable = d.code_object.linetable;
    l.code_firstlineno = d.code_object.firstlineno;
    l.code_adaptive = d.code_object.co_code_adaptive;
    l.interp_next = d.interpreter_state.next;
    l.interp_threads_head = d.interpreter_state.threads_head;
    l.runtime_interpreters_head = d.runtime_state.interpreters_head;
    l.ob_type = d.pyobject.ob_type;
    l.str_length = d.unicode_object.length;
    l.str_state = d.unicode_object.state;
    l.ascii_size = d.unicode_object.asciiobject_size;
    l.compact_size = d.unicode_object.asciiobject_size + 16;  // + utf8_length + utf8, as in 3.12
    l.bytes_size = d.bytes_object.ob_size;
    l.bytes_sval = d.bytes_object.ob_sval;
    return l;
}

}  // namespace

std::optional<PythonLayout> python_layout(unsigned long py_version, std::uintptr_t runtime) {
    switch (py_version >> 16) {
        case 0x030B: return k311;
        case 0x030C: return k312;
        case 0x030D: return runtime != 0 ? from_debug_offsets_313(runtime) : std::nullopt;
        default: return std::nullopt;  // 3.10 and older lack the 3.11 frame model; 3.14 is not known yet
    }
}

}  // namespace cumemaudit::shim
