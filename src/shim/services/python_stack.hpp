// python_stack: the innermost Python frames (file, function, line) of the calling thread, read without the
// interpreter's help. The calling thread is inside a driver call, so its own frame chain is frozen, and
// usually it released the GIL first (ctypes, Cython `with nogil`): no interpreter API that needs the GIL
// may be called, and the GIL must never be taken (its holder may wait on a lock this thread holds). So the
// walk only reads: the thread's PyThreadState from the interpreter's thread-local slot
// (PyGILState_GetThisThreadState, which takes no lock), then frames, code objects, str and bytes by the
// version's layout (python_layout.hpp), every read through safe_read and every object type-checked
// against PyCode_Type, PyUnicode_Type and PyBytes_Type. No interpreter symbols, an unknown version, a
// thread without a Python thread state, or a thread running in a sub-interpreter give no frames.
#pragma once

#include "ledger/python_frames.hpp"

namespace cumemaudit::shim {

// Interns up to `max` of the calling thread's Python frames, innermost first, into `table` and writes
// their tagged pcs to `out`; returns how many (0 outside Python).
int python_stack(ledger::PythonFrames& table, ledger::Pc* out, int max);

// The interpreter version the walker reads, e.g. "3.11"; "" where python_stack gives nothing.
const char* python_stack_support();
// In a fork child, from its atfork handler only (one thread alive): the walker's cache of code objects.
void reset_python_cache_in_child();

}  // namespace cumemaudit::shim
