// sendmmsg(2) and recvmmsg(2) are GNU extensions: declared only with _GNU_SOURCE, which Swift's view of the C
// library does not define. These forwards are compiled with it (as swift-nio's CNIOLinux does).
#define _GNU_SOURCE
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <spawn.h>
#include <errno.h>
#include "CLinuxShim.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* the same number on every architecture since Linux 5.3 */
#endif

_Static_assert(sizeof(bledfu_mmsghdr) == sizeof(struct mmsghdr), "bledfu_mmsghdr is struct mmsghdr");
_Static_assert(offsetof(bledfu_mmsghdr, msg_len) == offsetof(struct mmsghdr, msg_len), "msg_len offset");
_Static_assert(sizeof(bledfu_ucred) == sizeof(struct ucred), "bledfu_ucred is struct ucred");
_Static_assert(offsetof(bledfu_ucred, uid) == offsetof(struct ucred, uid), "uid offset");
_Static_assert(offsetof(bledfu_ucred, gid) == offsetof(struct ucred, gid), "gid offset");
_Static_assert(sizeof(bledfu_winsize) == sizeof(struct winsize), "bledfu_winsize is struct winsize");
_Static_assert(offsetof(bledfu_winsize, ws_col) == offsetof(struct winsize, ws_col), "ws_col offset");

int bledfu_sendmmsg(int fd, bledfu_mmsghdr *messages, unsigned int count, int flags) {
    return sendmmsg(fd, (struct mmsghdr *)messages, count, flags);
}

int bledfu_recvmmsg(int fd, bledfu_mmsghdr *messages, unsigned int count, int flags) {
    return recvmmsg(fd, (struct mmsghdr *)messages, count, flags, NULL);
}

int bledfu_pipe2(int fds[2], int flags) {
    return pipe2(fds, flags);
}

int bledfu_pidfd_open(int pid, unsigned int flags) {
    return (int)syscall(SYS_pidfd_open, pid, flags);
}

int bledfu_spawn_addclosefrom(posix_spawn_file_actions_t *actions, int from) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
#else
    (void)actions;
    (void)from;
    return ENOSYS;
#endif
}
