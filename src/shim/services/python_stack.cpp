#include "shim/services/python_stack.hpp"

#include "shim/services/loader.hpp"
#include "shim/services/python_layout.hpp"
#include "shim/services/python_linetable.hpp"
#include "shim/services/safe_read.hpp"

#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <atomic>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

namespace cumemaudit::shim {
namespace {

using Addr = std::uintptr_t;

struct Interpreter {
    PythonLayout layout;
    void* (*this_thread_state)();  // PyGILState_GetThisThreadState: the thread-local slot, no lock
    Addr code_type, str_type, bytes_type, runtime;
    char version[8];
};

// Found once, at the first capture (_PyRuntime too: without the interpreters list a sub-interpreter could
// not be told apart). Python programs have these symbols from their start (in the executable or its
// libpython); a program that loads libpython later, or privately, gets no frames.
const Interpreter* interpreter() {
    static const Interpreter* found = []() -> const Interpreter* {
        auto sym = [](const char* name) { return reinterpret_cast<Addr>(real_dlsym(RTLD_DEFAULT, name)); };
        const Addr version = sym("Py_Version");  // exported since 3.11
        const Addr get_ts = sym("PyGILState_GetThisThreadState");
        const Addr code = sym("PyCode_Type"), str = sym("PyUnicode_Type"), bytes = sym("PyBytes_Type");
        const Addr runtime = sym("_PyRuntime");
        unsigned long v = 0;
        if (!version || !get_ts || !code || !str || !bytes || !runtime || !safe_read_available() ||
            !safe_load(version, v))
            return nullptr;
        const auto layout = python_layout(v, runtime);
        if (!layout) return nullptr;
        auto* in = new Interpreter{*layout, reinterpret_cast<void* (*)()>(get_ts), code, str, bytes, runtime, {}};
        std::snprintf(in->version, sizeof in->version, "3.%u", layout->minor);
        return in;
    }();
    return found;
}

Addr load_ptr(Addr at) {
    Addr v = 0;
    return safe_load(at, v) ? v : 0;
}

// A struct read whole in one safe read, its fields taken by offset.
struct Block {
    std::array<std::uint8_t, 256> bytes{};
    template <typename T>
    T at(std::size_t offset) const {
        T v{};
        if (offset + sizeof v <= bytes.size()) std::memcpy(&v, bytes.data() + offset, sizeof v);
        return v;
    }
};

std::size_t span(std::initializer_list<std::size_t> offsets) { return std::max(offsets) + 8; }

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

// What a code object says about itself, decoded once. Keyed by the code object's address and checked
// against the pointers it holds: a code object is immutable and holds its name, file and line table alive,
// so the same address with the same three pointers and first line is the same code.
struct CodeInfo {
    Addr filename = 0, qualname = 0, linetable = 0;
    std::int32_t first_line = 0;
    std::string file, function;
    std::string table;  // co_linetable's bytes
};

class CodeCache {
public:
    // Copies the entry for `code` into `out` if its pointers still match.
    // Neither call ever waits: a lock held elsewhere (or by a thread that vanished at fork) means no cache
    // this time, never a stalled driver call.
    bool find(Addr code, const CodeInfo& probe, CodeInfo& out) {
        std::unique_lock lock(mu_, std::try_to_lock);
        if (!lock) return false;
        auto it = map_.find(code);
        if (it == map_.end() || it->second.filename != probe.filename || it->second.qualname != probe.qualname ||
            it->second.linetable != probe.linetable || it->second.first_line != probe.first_line)
            return false;
        out = it->second;
        return true;
    }
    void put(Addr code, const CodeInfo& info) {
        constexpr std::size_t kMaxEntries = 4096;  // bounded: a program that makes code objects forever
        std::unique_lock lock(mu_, std::try_to_lock);
        if (!lock) return;
        if (map_.size() >= kMaxEntries) map_.clear();
        map_[code] = info;
    }

    // A fork child: a parent thread may have held the lock (try-locked, so never waited on, but never
    // freed either). One thread runs: rebuilt, not taken.
    void reset_in_child() {
        new (&mu_) std::mutex();
        map_.clear();
    }

private:
    std::mutex mu_;
    std::unordered_map<Addr, CodeInfo> map_;
};

std::atomic<CodeCache*> g_code_cache{nullptr};

CodeCache& code_cache() {
    static CodeCache* const cache = [] {
        auto* c = new CodeCache();  // never destroyed: a capture may run during exit
        g_code_cache.store(c, std::memory_order_release);
        return c;
    }();
    return *cache;
}

// A compact str (file and function names always are) from its header and payload; "?" for anything else.
struct StrHeader {
    Block head;
    bool ok = false;
    std::size_t chars = 0, kind = 0, payload = 0;
};

StrHeader str_header(const Interpreter& in, const Block& head, bool read_ok) {
    constexpr std::size_t kMaxChars = 1024;
    const PythonLayout& l = in.layout;
    StrHeader h;
    const auto length = head.at<std::int64_t>(l.str_length);
    const auto state = head.at<std::uint32_t>(l.str_state);
    // state bits: interned 0-1, kind 2-4, compact 5, ascii 6 (3.11 to 3.13).
    const unsigned kind = state >> 2 & 7, compact = state >> 5 & 1, ascii = state >> 6 & 1;
    if (!read_ok || head.at<Addr>(l.ob_type) != in.str_type || length < 0 || !compact ||
        (kind != 1 && kind != 2 && kind != 4))
        return h;
    h.ok = true;
    h.chars = std::min<std::size_t>(static_cast<std::size_t>(length), kMaxChars);
    h.kind = kind;
    h.payload = ascii ? l.ascii_size : l.compact_size;
    return h;
}

std::string utf8_of(const StrHeader& h, const std::string& raw, bool read_ok) {
    if (!h.ok || !read_ok) return "?";
    std::string out;
    out.reserve(h.chars);
    for (std::size_t i = 0; i < h.chars; ++i) {
        std::uint32_t c = 0;
        std::memcpy(&c, raw.data() + i * h.kind, h.kind);  // little-endian: the low bytes of a code point
        append_utf8(out, c);
    }
    return out;
}

// File, function and line table of a code object not seen before: two batched reads (the three headers,
// then the three payloads).
void decode(const Interpreter& in, CodeInfo& info) {
    constexpr std::size_t kMaxTable = 16384;  // a longer table is cut: its later lines read as 0
    const PythonLayout& l = in.layout;
    Block file_head, name_head, table_head;
    const ReadSpan heads[] = {{info.filename, file_head.bytes.data(), l.ascii_size},
                              {info.qualname, name_head.bytes.data(), l.ascii_size},
                              {info.linetable, table_head.bytes.data(), l.bytes_sval}};
    const int got = safe_read_spans(heads, 3);
    const StrHeader file = str_header(in, file_head, got > 0), name = str_header(in, name_head, got > 1);
    const auto table_size = table_head.at<std::int64_t>(l.bytes_size);
    const bool table_ok = got > 2 && table_head.at<Addr>(l.ob_type) == in.bytes_type && table_size >= 0;
    std::string file_raw(file.chars * file.kind, '\0'), name_raw(name.chars * name.kind, '\0');
    info.table.assign(table_ok ? std::min<std::size_t>(static_cast<std::size_t>(table_size), kMaxTable) : 0, '\0');
    // Empty or unusable parts are read from a harmless address, so one failure does not hide the others.
    const auto addr_or = [](bool use, Addr a, const void* self) { return use ? a : reinterpret_cast<Addr>(self); };
    const ReadSpan bodies[] = {
        {addr_or(file.ok && !file_raw.empty(), info.filename + file.payload, &file_raw), file_raw.data(), file_raw.size()},
        {addr_or(name.ok && !name_raw.empty(), info.qualname + name.payload, &name_raw), name_raw.data(), name_raw.size()},
        {addr_or(table_ok && !info.table.empty(), info.linetable + l.bytes_sval, &info.table), info.table.data(),
         info.table.size()}};
    const int read = safe_read_spans(bodies, 3);
    info.file = utf8_of(file, file_raw, read > 0);
    info.function = utf8_of(name, name_raw, read > 1);
    if (read <= 2) info.table.clear();
}

Addr current_frame(const Interpreter& in, const Block& tstate) {
    const PythonLayout& l = in.layout;
    if (!l.via_cframe) return tstate.at<Addr>(l.ts_current_frame);
    const Addr cframe = tstate.at<Addr>(l.ts_cframe);
    return cframe ? load_ptr(cframe + l.cframe_current_frame) : 0;
}

std::size_t tstate_span(const PythonLayout& l) {
    return span({l.ts_next, l.ts_interp, l.ts_thread_id, l.via_cframe ? l.ts_cframe : l.ts_current_frame});
}

bool read_tstate(const Interpreter& in, Addr ts, Block& out) { return safe_read(ts, out.bytes.data(), tstate_span(in.layout)); }

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
        Block t;
        for (int k = 0; ts != 0 && k < kMaxThreads && read_tstate(in, ts, t); ++k, ts = t.at<Addr>(l.ts_next))
            if (t.at<unsigned long>(l.ts_thread_id) == self && current_frame(in, t) != 0) return true;
    }
    return false;
}

}  // namespace

void reset_python_cache_in_child() {
    if (CodeCache* c = g_code_cache.load(std::memory_order_acquire)) c->reset_in_child();
}

int python_stack(ledger::PythonFrames& table, ledger::Pc* out, int max) {
    constexpr int kMaxWalk = 1024;  // frames looked at, skipped ones included
    const Interpreter* in = interpreter();
    if (in == nullptr || max <= 0) return 0;
    const PythonLayout& l = in->layout;
    const Addr tstate = reinterpret_cast<Addr>(in->this_thread_state());
    if (tstate == 0) return 0;  // a thread the interpreter does not know (a C++ allocator thread)
    // The thread state and _PyRuntime.interpreters {head, main, next_id} (the same shape in 3.11 to 3.13),
    // in one read. next_id counts the interpreters ever made: 1 means no sub-interpreter has existed.
    Block ts;
    std::int64_t interpreters[3] = {};
    const ReadSpan first[] = {{tstate, ts.bytes.data(), tstate_span(l)},
                              {in->runtime + l.runtime_interpreters_head, interpreters, sizeof interpreters}};
    if (safe_read_spans(first, 2) != 2) return 0;
    const auto main_interp = static_cast<Addr>(interpreters[1]);
    if (main_interp == 0 || ts.at<Addr>(l.ts_interp) != main_interp) return 0;
    if (interpreters[2] > 1 && in_sub_interpreter(*in, main_interp, static_cast<unsigned long>(pthread_self()))) return 0;

    const std::size_t frame_span = span({l.frame_previous, l.frame_code, l.frame_instr, l.frame_owner});
    const std::size_t code_span = span({l.ob_type, l.code_filename, l.code_qualname, l.code_linetable, l.code_firstlineno});
    Block frame, code, next;
    Addr at = current_frame(*in, ts);
    if (at == 0 || !safe_read(at, frame.bytes.data(), frame_span)) return 0;
    int n = 0;
    for (int walked = 0; n < max && walked < kMaxWalk; ++walked) {
        const Addr code_at = frame.at<Addr>(l.frame_code), previous = frame.at<Addr>(l.frame_previous);
        const Addr instr = frame.at<Addr>(l.frame_instr);
        // This frame's code and the next frame, in one read.
        const ReadSpan reads[] = {{code_at, code.bytes.data(), code_span}, {previous, next.bytes.data(), frame_span}};
        const int got = safe_read_spans(reads, previous != 0 ? 2 : 1);
        const bool cstack = l.owner_cstack >= 0 && frame.at<std::uint8_t>(l.frame_owner) == l.owner_cstack;
        if (got >= 1 && !cstack && code.at<Addr>(l.ob_type) == in->code_type && instr >= code_at + l.code_adaptive) {
            CodeInfo info;
            info.filename = code.at<Addr>(l.code_filename);
            info.qualname = code.at<Addr>(l.code_qualname);
            info.linetable = code.at<Addr>(l.code_linetable);
            info.first_line = code.at<std::int32_t>(l.code_firstlineno);
            if (!code_cache().find(code_at, info, info)) {
                decode(*in, info);
                code_cache().put(code_at, info);
            }
            const auto bytes = std::span(reinterpret_cast<const std::uint8_t*>(info.table.data()), info.table.size());
            out[n++] = table.intern(info.file, info.function, line_of_offset(bytes, info.first_line, instr - (code_at + l.code_adaptive)));
        }
        if (previous == 0 || got < 2) break;
        frame = next;
    }
    return n;
}

const char* python_stack_support() {
    const Interpreter* in = interpreter();
    return in != nullptr ? in->version : "";
}

}  // namespace cumemaudit::shim
