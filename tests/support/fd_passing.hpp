// fd_passing: one open file descriptor sent to another process over a Unix socket (SCM_RIGHTS), as a
// POSIX-fd export travels between ranks. A failure ends the calling process: these are test programs.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace cumemaudit::program {

inline void send_fd(int sock, int fd) {
    char byte = 'f';
    iovec io{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr m{};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    if (sendmsg(sock, &m, 0) != 1) _exit(1);
}

inline int receive_fd(int sock) {
    char byte = 0;
    iovec io{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr m{};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    if (recvmsg(sock, &m, 0) != 1 || CMSG_FIRSTHDR(&m) == nullptr) _exit(1);
    int fd = -1;
    std::memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
    return fd;
}

}  // namespace cumemaudit::program
