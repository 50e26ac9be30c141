#include "python_stack.hpp"

#include "doors.hpp"
#include "python_layout.hpp"
#include "python_linetable.hpp"
#include "safe_read.hpp"

#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

namespace cumemaudit::shim {
namespace {

using Addr = std::uintptr_t;

struct Interpreter {
    PythonLayout layout;
    void* (*this_thread_state)();  // PyGILState_GetThisThreadState: the thread-local slot, no lock
    void* (*main_interpreter)();   // PyInterpreterState_Main: returns _PyRuntime.interpreters.main, no lock
    Addr code_type, str_type, bytes_type, runtime;
    char version[8];
};

// Found once, at the first capture (_PyRuntime too: without the interpreters list a sub-interpreter could
// not be told apart). Python programs have these symbols from their start (in the
// executable or its libpython); a program that loads libpython later, privately, gets no frames.
const Interpreter* interpreter() {
    static const Interpreter* found = []() -> const Interpreter* {
        auto sym = [](const char* name) { return reinterpret_cast<Addr>(real_dlsym(RTLD_DEFAULT, name)); };
        const Addr version = sym("Py_Version");  // exported since 3.11
        const Addr get_ts = sym("PyGILState_GetThisThreadState");
        const Addr get_main = sym("PyInterpreterState_Main");
        const Addr code = sym("PyCode_Type"), str = sym("PyUnicode_Type"), bytes = sym("PyBytes_Type");
        const Addr runtime = sym("_PyRuntime");
        unsigned long v = 0;
        if (!version || !get_ts || !get_main || !code || !str || !bytes || !runtime || !safe_read_available() ||
            !safe_load(version, v))
            return nullptr;
        const auto layout = python_layout(v, runtime);
        if (!layout) return nullptr;
        auto* in = new Interpreter{*layout, reinterpret_cast<void* (*)()>(get_ts), reinterpret_cast<void* (*)()>(get_main),
                                   code, str, bytes, runtime, {}};
        std::snprintf(in->version, sizeof in->version, "3.%u", layout->minor);
        return in;
    }();
    return found;
}

Addr load_ptr(Addr at) {
    Addr v = 0;
    return safe_load(at, v) ? v : 0;
}

bool has_type(const Interpreter& in, Addr object, Addr type) { return object != 0 && load_ptr(object + in.layout.ob_type) == type; }

void append_utf8(std::string& out, std::uint32_t c) {
    if (c < 0x80) {
        out += static_cast<char>(c);
    } else if (c < 0x800) {
        out += static_cast<char>(0xC0 | c >> 6);
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += static_cast<char>(0xE0 | c >> 12);
        out += static_cast<char>(0x80 | (c >> 6 & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | c >> 18);
        out += static_cast<char>(0x80 | (c >> 12 & 0x3F));
        out += static_cast<char>(0x80 | (c >> 6 & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    }
}

// A compact str as UTF-8 (file and function names are always compact); "?" for anything else.
std::string read_str(const Interpreter& in, Addr s) {
    constexpr std::size_t kMaxChars = 1024;
    const PythonLayout& l = in.layout;
    std::int64_t length = 0;
    std::uint32_t state = 0;
    if (!has_type(in, s, in.str_type) || !safe_load(s + l.str_length, length) || !safe_load(s + l.str_state, state) ||
        length < 0)
        return "?";
    // state bits: interned 0-1, kind 2-4, compact 5, ascii 6 (3.11 to 3.13).
    const unsigned kind = state >> 2 & 7, compact = state >> 5 & 1, ascii = state >> 6 & 1;
    if (!compact || (kind != 1 && kind != 2 && kind != 4)) return "?";
    const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(length), kMaxChars);
    std::string raw(n * kind, '\0');  // on the heap: the calling thread's stack may be small
    if (!safe_read(s + (ascii ? l.ascii_size : l.compact_size), raw.data(), raw.size())) return "?";
    std::string out;
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        std::uint32_t c = 0;
        std::memcpy(&c, raw.data() + i * kind, kind);  // little-endian: the low bytes of a code point
        append_utf8(out, c);
    }
    return out;
}

// The line of the instruction at `offset` bytes into the code, by the code object's line table.
std::uint32_t read_line(const Interpreter& in, Addr code, std::uint64_t offset) {
    constexpr std::size_t kMaxTable = 16384;  // a longer table is cut: its later lines read as 0
    const PythonLayout& l = in.layout;
    const Addr table = load_ptr(code + l.code_linetable);
    std::int64_t size = 0;
    std::int32_t first_line = 0;
    if (!has_type(in, table, in.bytes_type) || !safe_load(table + l.bytes_size, size) || size < 0 ||
        !safe_load(code + l.code_firstlineno, first_line))
        return 0;
    std::string bytes(std::min<std::size_t>(static_cast<std::size_t>(size), kMaxTable), '\0');
    if (!safe_read(table + l.bytes_sval, bytes.data(), bytes.size())) return 0;
    return line_of_offset(std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), first_line, offset);
}

Addr current_frame(const Interpreter& in, Addr tstate) {
    const PythonLayout& l = in.layout;
    if (!l.via_cframe) return load_ptr(tstate + l.ts_current_frame);
    const Addr cframe = load_ptr(tstate + l.ts_cframe);
    return cframe ? load_ptr(cframe + l.cframe_current_frame) : 0;
}

// Whether this thread has a thread state with Python frames on it in an interpreter other than the main
// one: it then runs code in a sub-interpreter (3.11 leaves the thread-local slot on the main interpreter's
// thread state while it does), and the main thread state's frames would name the wrong code.
bool in_sub_interpreter(const Interpreter& in, Addr main_interp, unsigned long self) {
    constexpr int kMaxInterpreters = 64, kMaxThreads = 4096;  // bounds: a torn list never loops forever
    const PythonLayout& l = in.layout;
    Addr interp = load_ptr(in.runtime + l.runtime_interpreters_head);
    for (int i = 0; interp != 0 && i < kMaxInterpreters; ++i, interp = load_ptr(interp + l.interp_next)) {
        if (interp == main_interp) continue;
        Addr ts = load_ptr(interp + l.interp_threads_head);
        for (int t = 0; ts != 0 && t < kMaxThreads; ++t, ts = load_ptr(ts + l.ts_next)) {
            unsigned long id = 0;
            if (safe_load(ts + l.ts_thread_id, id) && id == self && current_frame(in, ts) != 0) return true;
        }
    }
    return false;
}

}  // namespace

int python_stack(ledger::PythonFrames& table, ledger::Pc* out, int max) {
    constexpr int kMaxWalk = 1024;  // frames looked at, skipped ones included
    const Interpreter* in = interpreter();
    if (in == nullptr || max <= 0) return 0;
    const PythonLayout& l = in->layout;
    const Addr tstate = reinterpret_cast<Addr>(in->this_thread_state());
    const Addr main_interp = reinterpret_cast<Addr>(in->main_interpreter());
    if (tstate == 0 || main_interp == 0 || load_ptr(tstate + l.ts_interp) != main_interp) return 0;
    if (in_sub_interpreter(*in, main_interp, static_cast<unsigned long>(pthread_self()))) return 0;
    int n = 0;
    Addr frame = current_frame(*in, tstate);
    for (int walked = 0; frame != 0 && n < max && walked < kMaxWalk; ++walked, frame = load_ptr(frame + l.frame_previous)) {
        std::uint8_t owner = 0;
        if (l.owner_cstack >= 0 && safe_load(frame + l.frame_owner, owner) && owner == l.owner_cstack) continue;
        const Addr code = load_ptr(frame + l.frame_code);
        const Addr instr = load_ptr(frame + l.frame_instr);
        if (!has_type(*in, code, in->code_type) || instr < code + l.code_adaptive) continue;
        const std::uint32_t line = read_line(*in, code, instr - (code + l.code_adaptive));
        const std::string file = read_str(*in, load_ptr(code + l.code_filename));
        const std::string function = read_str(*in, load_ptr(code + l.code_qualname));
        out[n++] = table.intern(file, function, line);
    }
    return n;
}

const char* python_stack_support() {
    const Interpreter* in = interpreter();
    return in != nullptr ? in->version : "";
}

}  // namespace cumemaudit::shim
