#include "shim/services/safe_read.hpp"

#include <sys/uio.h>
#include <unistd.h>

namespace cumemaudit::shim {

bool safe_read(std::uintptr_t addr, void* out, std::size_t n) {
    if (n == 0) return true;
    if (addr == 0) return false;
    iovec local{out, n};
    iovec remote{reinterpret_cast<void*>(addr), n};
    // One iovec element is never split: the answer is all n bytes or an error.
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(n);
}

int safe_read_spans(const ReadSpan* spans, int count) {
    constexpr int kMax = 16;
    if (count <= 0) return 0;
    if (count > kMax) count = kMax;
    iovec local[kMax], remote[kMax];
    for (int i = 0; i < count; ++i) {
        if (spans[i].addr == 0) {  // a null pointer ends the batch: read what comes before it
            count = i;
            break;
        }
        local[i] = {spans[i].out, spans[i].n};
        remote[i] = {reinterpret_cast<void*>(spans[i].addr), spans[i].n};
    }
    if (count == 0) return 0;
    // The transfer stops at the first element it cannot read whole.
    ssize_t got = process_vm_readv(getpid(), local, static_cast<unsigned long>(count), remote,
                                   static_cast<unsigned long>(count), 0);
    int whole = 0;
    for (; whole < count && got >= static_cast<ssize_t>(spans[whole].n); ++whole) got -= static_cast<ssize_t>(spans[whole].n);
    return whole;
}

bool safe_read_available() {
    static const bool works = [] {
        static const int probe = 0x5eed;
        int copy = 0;
        return safe_read(reinterpret_cast<std::uintptr_t>(&probe), &copy, sizeof copy) && copy == probe;
    }();
    return works;
}

}  // namespace cumemaudit::shim
