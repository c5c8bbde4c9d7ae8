/*
 * CLinuxShim: the Linux declarations LinuxIO calls that Swift's Glibc module leaves out (the swift-nio
 * CNIOLinux shape): epoll, `struct winsize` of TIOCGWINSZ, (<sys/epoll.h>: struct epoll_event with the kernel's layout, packed on x86_64) and the
 * GNU sendmmsg(2)/recvmmsg(2) with `struct mmsghdr`, and `struct ucred` of SO_PEERCRED, which need _GNU_SOURCE
 * (defined in shim.c, where the one-line forwards live and the layouts are asserted against the GNU headers), and the
 * forwards to pipe2(2) and pidfd_open(2) that child processes need. Declarations only; layouts are pinned by
 * Tests/TransportTests/CShimLayoutTests.swift.
 */
#ifndef BLEDFU_CLINUXSHIM_H
#define BLEDFU_CLINUXSHIM_H

#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <spawn.h>

/// `struct mmsghdr` (sys/socket.h under _GNU_SOURCE): one message of sendmmsg/recvmmsg and the byte count the
/// kernel sets. Same layout (shim.c asserts it).
typedef struct {
    struct msghdr msg_hdr;
    unsigned int msg_len;
} bledfu_mmsghdr;

/// `struct ucred` (socket(7), SO_PEERCRED): pid@0, uid@4, gid@8. Same layout (shim.c asserts it).
typedef struct {
    int32_t pid;
    uint32_t uid;
    uint32_t gid;
} bledfu_ucred;
static const int BLEDFU_SO_PEERCRED = SO_PEERCRED;  /* 17 */

/// `struct winsize` (<sys/ioctl.h>, TIOCGWINSZ): the terminal's rows and columns (and pixels, unused). Same
/// layout (shim.c asserts it).
typedef struct {
    unsigned short ws_row;
    unsigned short ws_col;
    unsigned short ws_xpixel;
    unsigned short ws_ypixel;
} bledfu_winsize;
static const unsigned long BLEDFU_TIOCGWINSZ = TIOCGWINSZ;  /* 0x5413 */

/// sendmmsg(2).
int bledfu_sendmmsg(int fd, bledfu_mmsghdr *messages, unsigned int count, int flags);
/// recvmmsg(2) without a timeout.
int bledfu_recvmmsg(int fd, bledfu_mmsghdr *messages, unsigned int count, int flags);

/// pipe2(2) (GNU): both ends created with `flags` (O_CLOEXEC) in one call, so no other thread's child inherits them.
int bledfu_pipe2(int fds[2], int flags);
/// posix_spawn_file_actions_addclosefrom_np (glibc 2.34): the child closes every descriptor from `from` on before
/// exec, also those opened without O_CLOEXEC by other code of the parent. Returns ENOSYS on an older glibc.
int bledfu_spawn_addclosefrom(posix_spawn_file_actions_t *actions, int from);
/// pidfd_open(2) (Linux 5.3): a descriptor that becomes readable when the child `pid` exits. -1 with errno ENOSYS on
/// older kernels (no glibc wrapper before 2.36: a raw syscall).
int bledfu_pidfd_open(int pid, unsigned int flags);

#endif /* BLEDFU_CLINUXSHIM_H */
