// thread_annotations: which lock guards what, said in code, so Clang's -Wthread-safety checks it (the way
// abseil and tcmalloc do) where a comment could only hope. Under GCC the words compile to nothing. Mutex is
// a std::mutex with the capability annotation libstdc++'s lacks; MutexLock holds one for a scope.
#pragma once

#include <mutex>

#if defined(__clang__)
#define CUMEMAUDIT_TSA(x) __attribute__((x))
#else
#define CUMEMAUDIT_TSA(x)
#endif

#define CAPABILITY(x) CUMEMAUDIT_TSA(capability(x))
#define SCOPED_CAPABILITY CUMEMAUDIT_TSA(scoped_lockable)
#define GUARDED_BY(x) CUMEMAUDIT_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) CUMEMAUDIT_TSA(pt_guarded_by(x))
#define REQUIRES(...) CUMEMAUDIT_TSA(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) CUMEMAUDIT_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) CUMEMAUDIT_TSA(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) CUMEMAUDIT_TSA(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) CUMEMAUDIT_TSA(locks_excluded(__VA_ARGS__))

namespace cumemaudit {

class CAPABILITY("mutex") Mutex {
public:
    void lock() ACQUIRE() { m_.lock(); }
    void unlock() RELEASE() { m_.unlock(); }
    bool try_lock() TRY_ACQUIRE(true) { return m_.try_lock(); }

private:
    std::mutex m_;
};

class SCOPED_CAPABILITY MutexLock {
public:
    explicit MutexLock(Mutex& m) ACQUIRE(m) : m_(m) { m_.lock(); }
    ~MutexLock() RELEASE() { m_.unlock(); }
    MutexLock(const MutexLock&) = delete;
    MutexLock& operator=(const MutexLock&) = delete;

private:
    Mutex& m_;
};

}  // namespace cumemaudit
