//go:build linux && cgo

// The seccomp filter of filesystem confinement: ioctl TIOCSTI and
// TIOCLINUX push input into a terminal, which the agent shares with the
// shell that launched it, so a confined agent could type commands for
// that shell to run outside its confinement.

#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <endian.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#include "confine.h"

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#define COMPAT_ARCH AUDIT_ARCH_I386
#define NATIVE_IOCTL 16
#define X32_IOCTL (0x40000000 | 514)
#define COMPAT_IOCTL 54
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#define COMPAT_ARCH AUDIT_ARCH_ARM
#define NATIVE_IOCTL 29
#define X32_IOCTL 29
#define COMPAT_IOCTL 54
#else
#error "marshal-confine's seccomp filter knows x86_64 and aarch64"
#endif

#define TIOCSTI_ 0x5412
#define TIOCLINUX_ 0x541C

// no_tiocsti installs a seccomp filter that refuses ioctl TIOCSTI and
// TIOCLINUX with EPERM, for native and compat calls alike.
void no_tiocsti(void)
{
	const uint32_t arg1 = offsetof(struct seccomp_data, args) + 8 + (__BYTE_ORDER == __LITTLE_ENDIAN ? 0 : 4);
	struct sock_filter f[] = {
		/* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		/* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 0, 4),
		/* 2 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		/* 3 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_IOCTL, 6, 0),
		/* 4 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, X32_IOCTL, 5, 0),
		/* 5 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		/* 6 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, COMPAT_ARCH, 0, 2),
		/* 7 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		/* 8 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, COMPAT_IOCTL, 1, 0),
		/* 9 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		/* 10 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, arg1),
		/* 11 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI_, 2, 0),
		/* 12 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCLINUX_, 1, 0),
		/* 13 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		/* 14 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
	};
	struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		unsupported("the seccomp filter could not be installed", errno);
}
