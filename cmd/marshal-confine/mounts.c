//go:build linux && cgo

// The mounts of filesystem confinement (see fs.c): a none path hidden by
// an empty read-only directory or file, a read path inside a write tree
// bound read-only onto itself, a granted path inside a hidden or
// read-only one bound back, and a /dev/shm of the agent's own, all in a
// private mount namespace, then locked by a second user and mount
// namespace.
//
// A netns launch with a bridge mounts its resolver's /etc/resolv.conf
// here too (mount_resolver).
//
// Everything that hides comes from one tmpfs, the veil: a superblock made
// and torn down costs a launch more than all the binds of it.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "confine.h"
#include "fs.h"

#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif

struct mount_attr_ {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

struct open_how_ {
	uint64_t flags, mode, resolve;
};
#define RESOLVE_NO_SYMLINKS_ 0x04
#define RESOLVE_BENEATH_ 0x08

static int mount_setattr_(int fd, unsigned int flags, uint64_t set)
{
	struct mount_attr_ attr = {.attr_set = set};
	return (int)syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | flags, &attr, sizeof attr);
}

static int move_onto(int from, int to)
{
	return (int)syscall(SYS_move_mount, from, "", to, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
}

// make_tmpfs returns an unattached, empty tmpfs whose root has mode,
// of size (NULL: the kernel's default, half the memory, charged to the
// agent's cgroup as it fills), with the mount attributes attrs.
static int make_tmpfs(const char *mode, const char *size, unsigned int attrs)
{
	int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -1;
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", mode, 0) != 0 ||
	    (size && syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", size, 0) != 0) ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) != 0) {
		close(fs);
		return -1;
	}
	int m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, attrs);
	close(fs);
	return m;
}

int new_tmpfs(const char *mode)
{
	return make_tmpfs(mode, "64k", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
}

int shm_fd = -1;

// private_shm mounts a tmpfs of the agent's own on /dev/shm, where POSIX
// shared memory and semaphores live (Python's multiprocessing, Chromium,
// test databases): the agent may make them, while the host's, other
// processes' segments, stay out of its reach.
static void private_shm(void)
{
	int to = open("/dev/shm", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (to < 0)
		return; // no /dev/shm: nothing here uses one
	shm_fd = make_tmpfs("1777", NULL, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (shm_fd < 0 || move_onto(shm_fd, to) != 0)
		unsupported("a /dev/shm of the agent's own could not be mounted", errno);
	close(to);
}

// The veil's entries: an empty directory and an empty file, both of mode
// 0, shown in place of each hidden path; and, for a hidden directory
// with granted paths beneath, a directory of its own holding their mount
// points, of mode 0111: passed through, never listed.
#define VEIL_DIR "empty"
#define VEIL_FILE "file"

// veil_make makes name in the veil, a directory or an empty file.
static int veil_make(int veil, const char *name, int isdir, mode_t mode)
{
	if (isdir)
		return mkdirat(veil, name, mode) == 0 || errno == EEXIST ? 0 : -1;
	int f = openat(veil, name, O_CREAT | O_WRONLY | O_CLOEXEC, mode);
	if (f < 0)
		return -1;
	close(f);
	return 0;
}

// veil_path makes the mount point of rule r, beneath its hidden anchor,
// in the anchor's directory of the veil, component by component. The
// veil is a tmpfs of this launch, reachable by this process alone: no
// symlink can be in it.
static int veil_path(int veil, const struct rule *r)
{
	const struct rule *a = &rules[r->anchor];
	char buf[PATH_MAX];
	int n = snprintf(buf, sizeof buf, "%s/%s", a->veiled, r->real + (a->len == 1 ? 1 : a->len + 1));
	if (n < 0 || (size_t)n >= sizeof buf) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *slash = strchr(buf + strlen(a->veiled) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		int rc = veil_make(veil, buf, 1, 0111);
		*slash = '/';
		if (rc != 0)
			return -1;
	}
	return veil_make(veil, buf, r->isdir, r->isdir ? 0111 : 0);
}

// dir_of returns, for hidden path rule, a directory of it: its own, or
// its parent's.
static int dir_of(const void *rule)
{
	const struct rule *r = rule;
	if (r->isdir)
		return r->fd;
	char parent[PATH_MAX];
	snprintf(parent, sizeof parent, "%s", r->real);
	*strrchr(parent, '/') = '\0';
	return open(parent[0] ? parent : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

// bind_from binds name of tmpfs fs, unattached. Until Linux 6.15 nothing
// can be bound from an unattached mount: fs is then put, for a moment,
// on the directory dir returns, in this mount namespace only, before
// anything runs in it, and *attached says so until detach.
static int bind_from(int fs, const char *name, int (*dir)(const void *), const void *arg, int *attached)
{
	int m = (int)syscall(SYS_open_tree, fs, name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (m >= 0 || errno != EINVAL || *attached)
		return m;
	int to = dir(arg);
	if (to < 0 || move_onto(fs, to) != 0)
		unsupported("a tmpfs of the launch could not be attached", errno);
	*attached = 1;
	return (int)syscall(SYS_open_tree, fs, name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
}

// detach unmounts tmpfs fs, through its own descriptor, wherever
// bind_from attached it, and closes it.
static void detach(int fs, int attached)
{
	if (attached) {
		char self[32];
		snprintf(self, sizeof self, "/proc/self/fd/%d", fs);
		if (umount2(self, MNT_DETACH) != 0)
			unsupported("a tmpfs of the launch could not be detached", errno);
	}
	close(fs);
}

// weave makes the veil, read-only, and a bind of what each hidden path
// shows (rule->mnt), unattached.
static void weave(void)
{
	int veil = -1, made_file = 0, made_dir = 0;
	for (int i = 0; i < nrules; i++) {
		struct rule *r = &rules[i];
		int rc = 0;
		if (r->op == OP_HIDE && veil < 0 && (veil = new_tmpfs("0700")) < 0)
			unsupported("a tmpfs could not be made in the user namespace", errno);
		if (r->op == OP_HIDE && !r->isdir) {
			strcpy(r->veiled, VEIL_FILE);
			rc = made_file++ ? 0 : veil_make(veil, VEIL_FILE, 0, 0);
		} else if (r->op == OP_HIDE && r->children == 0) {
			strcpy(r->veiled, VEIL_DIR);
			rc = made_dir++ ? 0 : veil_make(veil, VEIL_DIR, 1, 0);
		} else if (r->op == OP_HIDE) {
			snprintf(r->veiled, sizeof r->veiled, "d%d", i);
			rc = veil_make(veil, r->veiled, 1, 0111);
		}
		if (rc == 0 && r->op != OP_NONE && r->anchor >= 0 && rules[r->anchor].op == OP_HIDE)
			rc = veil_path(veil, r);
		if (rc != 0)
			unsupported("the hiding tmpfs could not be filled", errno);
	}
	if (veil < 0)
		return;
	// Read-only before any bind: each bind keeps its flags.
	if (mount_setattr_(veil, 0, MOUNT_ATTR_RDONLY) != 0)
		unsupported("the hiding tmpfs could not be made read-only", errno);
	int attached = 0;
	for (int i = 0; i < nrules; i++) {
		struct rule *r = &rules[i];
		if (r->op != OP_HIDE || r->fd < 0)
			continue;
		if ((r->mnt = bind_from(veil, r->veiled, dir_of, r, &attached)) < 0)
			unsupported("the hiding tmpfs could not be bound", errno);
	}
	detach(veil, attached);
}

// place returns where rule r's mount goes: its own path, or, beneath an
// ancestor's mount, the same place inside that mount.
static int place(struct rule *r)
{
	if (r->anchor < 0)
		return r->fd;
	struct rule *a = &rules[r->anchor];
	const char *rel = r->real + (a->len == 1 ? 1 : a->len + 1);
	struct open_how_ how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS_ | RESOLVE_BENEATH_};
	return (int)syscall(SYS_openat2, a->mnt, rel, &how, sizeof how);
}

// mount_rule makes rule r's mount.
static int mount_rule(struct rule *r)
{
	int to = place(r);
	if (to < 0)
		return -1;
	if (r->op != OP_HIDE) {
		r->mnt = (int)syscall(SYS_open_tree, r->fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
		if (r->mnt < 0)
			return -1;
		if (r->op == OP_RO && mount_setattr_(r->mnt, AT_RECURSIVE, MOUNT_ATTR_RDONLY) != 0)
			return -1;
	}
	return move_onto(r->mnt, to);
}

// own_mount_namespace moves this process into a private mount namespace
// of its own, and an IPC namespace of its own: the System V shared
// memory, semaphores and message queues and the POSIX message queues of
// processes outside are then out of the agent's reach, as abstract
// sockets and signals are. Root makes them without a user namespace
// when it may: the lock below needs one anyway, and each costs a launch.
static void own_mount_namespace(int in_userns)
{
	static int made;
	if (made++)
		return;
	if (in_userns) {
		if (unshare(CLONE_NEWNS | CLONE_NEWIPC) != 0)
			unsupported("a mount and IPC namespace could not be made", errno);
	} else if (geteuid() != 0 || unshare(CLONE_NEWNS | CLONE_NEWIPC) != 0) {
		unshare_user(CLONE_NEWNS | CLONE_NEWIPC);
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		unsupported("the mount namespace could not be made private", errno);
}

void make_mounts(int in_userns, int lock)
{
	char cwd[PATH_MAX];
	if (getcwd(cwd, sizeof cwd) == NULL)
		cwd[0] = '\0';
	own_mount_namespace(in_userns);
	for (int i = 0; i < nrules; i++) {
		struct rule *r = &rules[i];
		if (r->real && r->op != OP_NONE)
			r->fd = open(r->real, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	}
	weave();
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
	if (want_shm)
		private_shm();
	// The lock: in a mount namespace owned by a user namespace below the
	// one that made them, the mounts cannot be unmounted or uncovered.
	if (lock)
		unshare_user(CLONE_NEWNS);
	// The working directory is looked up again, among the new mounts.
	if (cwd[0] == '\0' || chdir(cwd) != 0)
		if (chdir("/") != 0)
			unsupported("the working directory could not be entered", errno);
}

// The agent's /etc/resolv.conf in a netns launch with a bridge: the
// bridge's resolver, the only one its namespace can reach.
static const char resolver_conf[] =
	"# The resolver of this agent's network namespace: it answers only the\n"
	"# names its profile's egress rules could allow.\n"
	"nameserver 127.0.0.1\n";

static int etc(const void *unused)
{
	(void)unused;
	return open("/etc", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

void mount_resolver(void)
{
	own_mount_namespace(1);
	// Opened in the new namespace, where the mount goes. The file a
	// symlink names is covered: the link itself stays.
	int target = open("/etc/resolv.conf", O_PATH | O_CLOEXEC);
	if (target < 0 && errno == ENOENT)
		return; // no file, or a dangling link: C libraries ask 127.0.0.1 then
	struct stat st;
	if (target < 0 || fstat(target, &st) != 0)
		unsupported("/etc/resolv.conf could not be opened", errno);
	if (!S_ISREG(st.st_mode))
		unsupported("/etc/resolv.conf is not a file", EINVAL);
	int fs = new_tmpfs("0755");
	if (fs < 0)
		unsupported("a tmpfs could not be made in the user namespace", errno);
	int f = openat(fs, "resolv.conf", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (f < 0 || write(f, resolver_conf, sizeof resolver_conf - 1) != (ssize_t)(sizeof resolver_conf - 1))
		unsupported("the resolver's /etc/resolv.conf could not be written", errno);
	close(f);
	if (mount_setattr_(fs, 0, MOUNT_ATTR_RDONLY) != 0)
		unsupported("a tmpfs could not be made read-only", errno);
	int attached = 0;
	int m = bind_from(fs, "resolv.conf", etc, NULL, &attached);
	if (m < 0)
		unsupported("the resolver's /etc/resolv.conf could not be bound", errno);
	detach(fs, attached);
	if (move_onto(m, target) != 0)
		unsupported("the resolver's /etc/resolv.conf could not be mounted", errno);
	close(m);
	close(target);
}
