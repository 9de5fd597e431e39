//go:build linux && cgo

// Filesystem confinement, applied in the launching process before it
// execs the agent, so that the kernel enforces it for the agent's whole
// tree from its first instruction:
//
//   - Landlock grants read or write beneath each rule's path, and read
//     beneath / when the default is read. Its rules only add, so a path
//     that must be narrower than a tree that grants more is made so by
//     a mount:
//   - in a private mount namespace of a user namespace, a none path is
//     hidden (an empty read-only tmpfs on a directory, an empty
//     unreadable read-only file on anything else), a read path inside a
//     write tree is bound read-only onto itself, and a granted path
//     inside a hidden or read-only one is bound back. A second user and
//     mount namespace then locks those mounts, as bubblewrap does: they
//     cannot be unmounted or uncovered from inside, and Landlock forbids
//     mounting and unmounting to the agent altogether.
//   - no_new_privs (setuid programs gain nothing), and a seccomp filter
//     refuses TIOCSTI and TIOCLINUX, which push input into a terminal.
//   - from Landlock ABI 6, abstract unix sockets and signals are scoped
//     to the agent's own tree.
//
// Paths are resolved (symlinks followed) before anything is decided, and
// mounts are made on file descriptors, so a path swapped meanwhile
// cannot move a mount elsewhere.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sched.h>
#include <endian.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "confine.h"

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif

// Landlock, as linux/landlock.h of ABI 7 has it.
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_FS_EXECUTE (1ULL << 0)
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_REMOVE_DIR (1ULL << 4)
#define LL_FS_REMOVE_FILE (1ULL << 5)
#define LL_FS_MAKE_CHAR (1ULL << 6)
#define LL_FS_MAKE_DIR (1ULL << 7)
#define LL_FS_MAKE_REG (1ULL << 8)
#define LL_FS_MAKE_SOCK (1ULL << 9)
#define LL_FS_MAKE_FIFO (1ULL << 10)
#define LL_FS_MAKE_BLOCK (1ULL << 11)
#define LL_FS_MAKE_SYM (1ULL << 12)
#define LL_FS_REFER (1ULL << 13)
#define LL_FS_TRUNCATE (1ULL << 14)
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LL_SCOPE_SIGNAL (1ULL << 1)

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

struct ll_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

// The rights of read and write, and those a rule on a file may hold.
#define READ_RIGHTS (LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR)
#define WRITE_RIGHTS (READ_RIGHTS | LL_FS_WRITE_FILE | LL_FS_REMOVE_DIR | LL_FS_REMOVE_FILE | LL_FS_MAKE_DIR | \
	LL_FS_MAKE_REG | LL_FS_MAKE_SOCK | LL_FS_MAKE_FIFO | LL_FS_MAKE_SYM | LL_FS_REFER | LL_FS_TRUNCATE)
#define FILE_RIGHTS (LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE)

// The lowest Landlock ABI confinement needs: 2, where a file may be
// renamed or linked into another directory (REFER), as git does.
#define MIN_ABI 2
// From ABI 6 abstract unix sockets and signals can be scoped.
#define SCOPE_ABI 6

// The setting that lowers the ABI used, to try what an older kernel
// gives: never above what this one gives.
#define ABI_MAX_ENV "MARSHAL_LANDLOCK_ABI_MAX"

struct mount_attr_ {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

struct open_how_ {
	uint64_t flags, mode, resolve;
};
#define RESOLVE_NO_SYMLINKS_ 0x04
#define RESOLVE_BENEATH_ 0x08

enum { FS_NONE, FS_READ, FS_WRITE };
enum { OP_NONE, OP_HIDE, OP_RO, OP_RW };

#define MAX_RULES 128

struct rule {
	int access;
	const char *path;   // as given
	char real[PATH_MAX]; // resolved; "" when it does not exist
	size_t len;
	int isdir;
	int op;              // the mount that narrows or restores it
	int anchor;          // the nearest ancestor with an op, -1 for none
	int children;        // ops anchored at it
	int fd;              // O_PATH, in the agent's mount namespace
	int mnt;             // the root of the mount its op made
};

static struct rule rules[MAX_RULES];
static int nrules;
static int fs_default = -1;
static const char *tmpdir;
static int abi;
static int need_mounts;

static int access_of(const char *s, size_t n)
{
	if (n == 4 && strncmp(s, "none", 4) == 0)
		return FS_NONE;
	if (n == 4 && strncmp(s, "read", 4) == 0)
		return FS_READ;
	if (n == 5 && strncmp(s, "write", 5) == 0)
		return FS_WRITE;
	return -1;
}

int fs_flag(const char *flag, const char *value)
{
	if (strcmp(flag, "--fs-default") == 0) {
		fs_default = access_of(value, strlen(value));
		if (fs_default == FS_WRITE || fs_default < 0)
			usage("--fs-default is read or none");
		return 1;
	}
	if (strcmp(flag, "--fs") == 0) {
		const char *colon = strchr(value, ':');
		int a = colon ? access_of(value, (size_t)(colon - value)) : -1;
		if (a < 0 || colon[1] != '/')
			usage("--fs takes none, read or write, ':' and an absolute path");
		if (nrules == MAX_RULES)
			usage("too many --fs rules");
		rules[nrules].access = a;
		rules[nrules].path = colon + 1;
		nrules++;
		return 1;
	}
	if (strcmp(flag, "--tmp") == 0) {
		if (*value != '/')
			usage("--tmp needs an absolute path");
		tmpdir = value;
		return 1;
	}
	return 0;
}

int fs_enabled(void)
{
	return fs_default >= 0 || nrules > 0 || tmpdir;
}

// landlock_abi returns the Landlock ABI to use, refusing one below
// MIN_ABI.
static int landlock_abi(void)
{
	long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	if (v < 0) {
		if (errno == EOPNOTSUPP)
			unsupported("Landlock is disabled in this kernel (add landlock to the lsm= boot parameter)", errno);
		unsupported("this kernel has no Landlock (Linux 5.19 or later with CONFIG_SECURITY_LANDLOCK is needed)", errno);
	}
	const char *max = getenv(ABI_MAX_ENV);
	if (max && *max) {
		long m = strtol(max, NULL, 10);
		if (m >= 0 && m < v)
			v = m;
	}
	if (v < MIN_ABI) {
		char what[160];
		snprintf(what, sizeof what, "Landlock ABI %d or later is needed, this host gives %ld (Linux 5.19 or later)", MIN_ABI, v);
		unsupported(what, EOPNOTSUPP);
	}
	return (int)v;
}

// beneath reports whether path b is a is or beneath it.
static int beneath(const struct rule *a, const struct rule *b)
{
	if (a->len == 1)
		return 1; // "/"
	return strncmp(a->real, b->real, a->len) == 0 && (b->real[a->len] == '/' || b->real[a->len] == '\0');
}

// plan resolves the rules and decides each one's mount.
static void plan(void)
{
	for (int i = 0; i < nrules; i++) {
		struct rule *r = &rules[i];
		struct stat st;
		r->fd = r->mnt = -1;
		r->anchor = -1;
		if (realpath(r->path, r->real) == NULL || stat(r->real, &st) != 0) {
			r->real[0] = '\0';
			continue;
		}
		r->len = strlen(r->real);
		r->isdir = S_ISDIR(st.st_mode);
		// Two rules on one path: the later decides.
		for (int j = 0; j < i; j++)
			if (rules[j].real[0] && strcmp(rules[j].real, r->real) == 0)
				rules[j].real[0] = '\0';
	}
	// Ancestors first: a shorter path is never beneath a longer one.
	for (int i = 1; i < nrules; i++) {
		struct rule r = rules[i];
		int j = i - 1;
		for (; j >= 0 && strlen(rules[j].real) > strlen(r.real); j--)
			rules[j + 1] = rules[j];
		rules[j + 1] = r;
	}
	for (int i = 0; i < nrules; i++) {
		struct rule *r = &rules[i];
		if (!r->real[0])
			continue;
		int granted = fs_default == FS_READ ? FS_READ : FS_NONE;
		for (int j = 0; j < i; j++) {
			struct rule *a = &rules[j];
			if (!a->real[0] || a->len == r->len || !beneath(a, r))
				continue;
			if (a->access > granted)
				granted = a->access;
			if (a->op != OP_NONE)
				r->anchor = j; // the longest comes last
		}
		int view = r->anchor < 0 ? OP_RW : rules[r->anchor].op;
		switch (r->access) {
		case FS_NONE:
			// Hidden even where nothing grants it: Landlock does not
			// keep a process from connecting to a unix socket.
			if (view != OP_HIDE)
				r->op = OP_HIDE;
			break;
		case FS_READ:
			if (view == OP_HIDE || (view == OP_RW && granted == FS_WRITE))
				r->op = OP_RO;
			break;
		case FS_WRITE:
			if (view == OP_HIDE || view == OP_RO)
				r->op = OP_RW;
			break;
		}
		if (r->op != OP_NONE) {
			need_mounts = 1;
			if (r->anchor >= 0)
				rules[r->anchor].children++;
		}
	}
}

void fs_prepare(void)
{
	confining = "filesystem confinement";
	if (fs_default < 0)
		fs_default = FS_READ;
	abi = landlock_abi();
	if (tmpdir) {
		if (mkdir(tmpdir, 0700) != 0) {
			char detail[PATH_MAX + 64];
			snprintf(detail, sizeof detail, "the launch's temporary directory %s could not be made: %s", tmpdir, strerror(errno));
			refuse(EXIT_INTERNAL, "INTERNAL", detail);
		}
		setenv("TMPDIR", tmpdir, 1);
	}
	plan();
}

static int mount_setattr_(int fd, unsigned int flags, uint64_t set)
{
	struct mount_attr_ attr = {.attr_set = set};
	return (int)syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | flags, &attr, sizeof attr);
}

static int move_onto(int from, int to)
{
	return (int)syscall(SYS_move_mount, from, "", to, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
}

// new_tmpfs returns an unattached, empty tmpfs whose root has mode.
static int new_tmpfs(const char *mode)
{
	int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -1;
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", mode, 0) != 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", "64k", 0) != 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) != 0) {
		close(fs);
		return -1;
	}
	int m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	close(fs);
	return m;
}

// hidden_file is what hides a file, a socket or a device: an empty file
// of mode 0 on a tmpfs of its own, made once and bound read-only onto
// each.
static int hidden_file = -1;

static int hide_file(int target)
{
	if (hidden_file < 0) {
		int m = new_tmpfs("0700");
		if (m < 0)
			return -1;
		int f = openat(m, "hidden", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0);
		if (f < 0)
			return -1;
		close(f);
		hidden_file = (int)syscall(SYS_open_tree, m, "hidden", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		close(m);
		if (hidden_file < 0)
			return -1;
	}
	int c = (int)syscall(SYS_open_tree, hidden_file, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (c < 0 || mount_setattr_(c, 0, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC) != 0)
		return -1;
	if (move_onto(c, target) != 0)
		return -1;
	return c;
}

// place returns where rule r's mount goes: its own path, or, beneath an
// ancestor's mount, the same place inside that mount, made first when
// the ancestor is a hiding tmpfs.
static int place(struct rule *r)
{
	if (r->anchor < 0)
		return r->fd;
	struct rule *a = &rules[r->anchor];
	const char *rel = r->real + (a->len == 1 ? 1 : a->len + 1);
	if (a->op != OP_HIDE) {
		struct open_how_ how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS_ | RESOLVE_BENEATH_};
		return (int)syscall(SYS_openat2, a->mnt, rel, &how, sizeof how);
	}
	// Make the path inside the empty tmpfs, component by component.
	char buf[PATH_MAX];
	snprintf(buf, sizeof buf, "%s", rel);
	int dir = dup(a->mnt);
	char *comp = buf;
	for (;;) {
		char *slash = strchr(comp, '/');
		if (slash)
			*slash = '\0';
		if (slash || r->isdir) {
			if (mkdirat(dir, comp, 0711) != 0 && errno != EEXIST)
				return -1;
		} else {
			int f = openat(dir, comp, O_CREAT | O_WRONLY | O_CLOEXEC, 0);
			if (f < 0)
				return -1;
			close(f);
		}
		int next = openat(dir, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		close(dir);
		if (next < 0 || !slash)
			return next;
		dir = next;
		comp = slash + 1;
	}
}

// mount_rule makes rule r's mount.
static int mount_rule(struct rule *r)
{
	int to = place(r);
	if (to < 0)
		return -1;
	if (r->op == OP_HIDE) {
		if (!r->isdir) {
			r->mnt = hide_file(to);
			return r->mnt < 0 ? -1 : 0;
		}
		r->mnt = new_tmpfs(r->children ? "0711" : "0");
		return r->mnt < 0 ? -1 : move_onto(r->mnt, to);
	}
	r->mnt = (int)syscall(SYS_open_tree, r->fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
	if (r->mnt < 0)
		return -1;
	if (r->op == OP_RO && mount_setattr_(r->mnt, AT_RECURSIVE, MOUNT_ATTR_RDONLY) != 0)
		return -1;
	return move_onto(r->mnt, to);
}

// make_mounts makes the mounts in a mount namespace of their own, and
// locks them in a user and mount namespace below it.
static void make_mounts(int in_userns)
{
	char cwd[PATH_MAX];
	if (getcwd(cwd, sizeof cwd) == NULL)
		cwd[0] = '\0';
	if (in_userns) {
		if (unshare(CLONE_NEWNS) != 0)
			unsupported("a mount namespace could not be made", errno);
	} else {
		unshare_user(CLONE_NEWNS);
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		unsupported("the mount namespace could not be made private", errno);
	for (int i = 0; i < nrules; i++) {
		struct rule *r = &rules[i];
		if (r->real[0] && (r->op != OP_NONE || r->access != FS_NONE))
			r->fd = open(r->real, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	}
	for (int i = 0; i < nrules; i++) {
		struct rule *r = &rules[i];
		if (r->op == OP_NONE || r->fd < 0)
			continue;
		if (mount_rule(r) != 0) {
			char what[PATH_MAX + 64];
			snprintf(what, sizeof what, "a mount could not be made on %s", r->real);
			unsupported(what, errno);
		}
	}
	for (int i = 0; i < nrules; i++) {
		struct rule *r = &rules[i];
		if (r->op == OP_HIDE && r->isdir && r->mnt >= 0 && mount_setattr_(r->mnt, 0, MOUNT_ATTR_RDONLY) != 0)
			unsupported("a hiding mount could not be made read-only", errno);
	}
	// The lock: in a mount namespace owned by a user namespace below the
	// one that made them, the mounts cannot be unmounted or uncovered.
	unshare_user(CLONE_NEWNS);
	// The working directory is looked up again, among the new mounts.
	if (cwd[0] == '\0' || chdir(cwd) != 0)
		if (chdir("/") != 0)
			unsupported("the working directory could not be entered", errno);
}

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
static void no_tiocsti(void)
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

// add_rule lets the Landlock ruleset grant rights beneath path.
static void add_rule(int ruleset, uint64_t handled, const char *path, int isdir, uint64_t rights)
{
	int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return; // gone meanwhile: nothing to grant
	struct ll_path_beneath_attr pb = {.allowed_access = rights & handled & (isdir ? ~0ULL : FILE_RIGHTS), .parent_fd = fd};
	if (syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &pb, 0) != 0) {
		char what[PATH_MAX + 64];
		snprintf(what, sizeof what, "a Landlock rule could not be added for %s", path);
		unsupported(what, errno);
	}
	close(fd);
}

// restrict_self enforces the rules on this process and all it starts.
static void restrict_self(void)
{
	uint64_t handled = WRITE_RIGHTS | LL_FS_MAKE_CHAR | LL_FS_MAKE_BLOCK;
	if (abi < 3)
		handled &= ~LL_FS_TRUNCATE;
	struct ll_ruleset_attr attr = {.handled_access_fs = handled};
	size_t size = offsetof(struct ll_ruleset_attr, handled_access_net);
	if (abi >= SCOPE_ABI) {
		attr.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL;
		size = sizeof attr;
	}
	int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
	if (rs < 0)
		unsupported("the Landlock ruleset could not be made", errno);
	if (fs_default == FS_READ)
		add_rule(rs, handled, "/", 1, READ_RIGHTS);
	for (int i = 0; i < nrules; i++) {
		struct rule *r = &rules[i];
		if (r->real[0] && r->access != FS_NONE)
			add_rule(rs, handled, r->real, r->isdir, r->access == FS_WRITE ? WRITE_RIGHTS : READ_RIGHTS);
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		unsupported("no_new_privs could not be set", errno);
	no_tiocsti();
	if (syscall(SYS_landlock_restrict_self, rs, 0) != 0)
		unsupported("Landlock could not be enforced", errno);
	close(rs);
}

void fs_apply(int in_userns)
{
	confining = "filesystem confinement";
	if (need_mounts)
		make_mounts(in_userns);
	restrict_self();
	for (int i = 0; i < nrules; i++) {
		if (rules[i].fd >= 0)
			close(rules[i].fd);
		if (rules[i].mnt >= 0)
			close(rules[i].mnt);
	}
	if (hidden_file >= 0)
		close(hidden_file);
}

void fs_check(void)
{
	abi = landlock_abi();
	unshare_user(CLONE_NEWNS);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		unsupported("the mount namespace could not be made private", errno);
	int m = new_tmpfs("0");
	if (m < 0)
		unsupported("a tmpfs could not be made in the user namespace", errno);
	close(m);
	fs_default = FS_READ;
	restrict_self();
	printf("landlock abi %d\n", abi);
	fflush(stdout);
	_exit(0);
}
