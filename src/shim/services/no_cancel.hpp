// no_cancel: cancellation held off while the shim works on a program's thread. The shim's writes (open,
// write, fsync) are cancellation points, inside noexcept code: a pthread_cancel acted on there would unwind
// through noexcept frames and terminate the process. The program's own cancellation request stays pending
// and is acted on at its next cancellation point after the shim returns.
#pragma once

#include <pthread.h>

namespace cumemaudit::shim {

class NoCancel {
public:
    NoCancel() noexcept { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &saved_); }
    ~NoCancel() {
        int ignored;
        pthread_setcancelstate(saved_, &ignored);
    }
    NoCancel(const NoCancel&) = delete;
    NoCancel& operator=(const NoCancel&) = delete;

private:
    int saved_ = PTHREAD_CANCEL_ENABLE;
};

}  // namespace cumemaudit::shim
