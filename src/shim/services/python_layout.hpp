// python_layout: where CPython keeps what the frame walker reads, per interpreter version: the thread
// state's current frame, a frame's code and instruction pointer, a code object's names and line table,
// the interpreters list, and str/bytes payloads. 3.11 and 3.12 publish nothing, so their offsets are
// written down here (read off their headers, as py-spy and austin do); 3.13 publishes _Py_DebugOffsets
// at the start of _PyRuntime, which is read instead, so debug builds of 3.13 work too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace cumemaudit::shim {

struct PythonLayout {
    unsigned minor = 0;  // 11 for 3.11
    // PyThreadState
    std::size_t ts_next, ts_interp, ts_thread_id;
    bool via_cframe;                  // 3.11/3.12: tstate->cframe->current_frame; 3.13: tstate->current_frame
    std::size_t ts_cframe, cframe_current_frame, ts_current_frame;
    // _PyInterpreterFrame
    std::size_t frame_previous, frame_code, frame_instr, frame_owner;
    int owner_cstack;                 // the owner value of C-stack entry frames; -1 where there are none
    // PyCodeObject
    std::size_t code_filename, code_qualname, code_linetable, code_firstlineno, code_adaptive;
    // PyInterpreterState and _PyRuntimeState
    std::size_t interp_next, interp_threads_head, runtime_interpreters_head;
    // PyObject, str (compact forms only), bytes
    std::size_t ob_type, str_length, str_state, ascii_size, compact_size, bytes_size, bytes_sval;
};

// The layout for the interpreter whose Py_Version is `py_version` and whose _PyRuntime is at `runtime`
// (3.13 reads its debug offsets there, through safe reads); nothing for versions it does not know and
// for free-threaded builds.
std::optional<PythonLayout> python_layout(unsigned long py_version, std::uintptr_t runtime);

}  // namespace cumemaudit::shim
