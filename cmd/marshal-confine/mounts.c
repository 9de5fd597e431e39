//go:build linux && cgo

// The mounts of filesystem confinement (see fs.c): a none path hidden by
// an empty read-only directory or file, a read path inside a write tree
// bound read-only onto itself, a granted path inside a hidden or
// read-only one bound back, all in a private mount namespace, then
// locked by a second user and mount namespace.
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

int new_tmpfs(const char *mode)
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

// attach puts the veil, for a moment, on the directory of hidden path r,
// in this mount namespace only, before anything runs in it: until Linux
// 6.15 nothing can be bound from an unattached mount.
static void attach(int veil, const struct rule *r)
{
	int to = r->fd;
	if (!r->isdir) {
		char parent[PATH_MAX];
		snprintf(parent, sizeof parent, "%s", r->real);
		*strrchr(parent, '/') = '\0';
		to = open(parent[0] ? parent : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	}
	if (to < 0 || move_onto(veil, to) != 0)
		unsupported("the hiding tmpfs could not be attached", errno);
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
		r->mnt = (int)syscall(SYS_open_tree, veil, r->veiled, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (r->mnt < 0 && errno == EINVAL && !attached) {
			attach(veil, r);
			attached = 1;
			r->mnt = (int)syscall(SYS_open_tree, veil, r->veiled, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		}
		if (r->mnt < 0)
			unsupported("the hiding tmpfs could not be bound", errno);
	}
	// Detached again through its own descriptor, wherever it went.
	if (attached) {
		char self[32];
		snprintf(self, sizeof self, "/proc/self/fd/%d", veil);
		if (umount2(self, MNT_DETACH) != 0)
			unsupported("the hiding tmpfs could not be detached", errno);
	}
	close(veil);
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
// of its own. Root makes it without a user namespace when it may: the
// lock below needs one anyway, and each costs a launch.
static void own_mount_namespace(int in_userns)
{
	if (in_userns) {
		if (unshare(CLONE_NEWNS) != 0)
			unsupported("a mount namespace could not be made", errno);
	} else if (geteuid() != 0 || unshare(CLONE_NEWNS) != 0) {
		unshare_user(CLONE_NEWNS);
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		unsupported("the mount namespace could not be made private", errno);
}

void make_mounts(int in_userns)
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
	// The lock: in a mount namespace owned by a user namespace below the
	// one that made them, the mounts cannot be unmounted or uncovered.
	unshare_user(CLONE_NEWNS);
	// The working directory is looked up again, among the new mounts.
	if (cwd[0] == '\0' || chdir(cwd) != 0)
		if (chdir("/") != 0)
			unsupported("the working directory could not be entered", errno);
}
