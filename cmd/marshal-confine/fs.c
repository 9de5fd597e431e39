//go:build linux && cgo

// Filesystem confinement, applied in the launching process before it
// execs the agent, so that the kernel enforces it for the agent's whole
// tree from its first instruction:
//
//   - Landlock grants read or write beneath each rule's path, and read
//     beneath / when the default is read. Its rules only add, so a path
//     that must be narrower than a tree that grants more is made so by
//     a mount:
//   - in a private mount namespace (of a user namespace, but for root),
//     a none path is hidden (an empty read-only directory or an empty
//     unreadable read-only file, binds of one tmpfs), a read path inside a
//     write tree is bound read-only onto itself, and a granted path
//     inside a hidden or read-only one is bound back. A second user and
//     mount namespace then locks those mounts, as bubblewrap does: they
//     cannot be unmounted or uncovered from inside, and Landlock forbids
//     mounting and unmounting to the agent altogether (see mounts.c).
//   - the ssh agent's socket (SSH_AUTH_SOCK) is hidden like the keys it
//     holds, unless a rule names it; /dev/shm is a writable tmpfs of the
//     agent's own, unless a rule names it.
//   - no_new_privs (setuid programs gain nothing), and a seccomp filter
//     refuses TIOCSTI and TIOCLINUX, which push input into a terminal
//     (seccomp.c).
//   - from Landlock ABI 6, abstract unix sockets and signals are scoped
//     to the agent's own tree.
//
// Paths are resolved (symlinks followed) before anything is decided, and
// mounts and Landlock rules are made on file descriptors, so a path
// swapped meanwhile cannot move a mount or a grant elsewhere.

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
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "confine.h"
#include "fs.h"
#include "landlock.h"

// The lowest Landlock ABI confinement needs: 2, where a file may be
// renamed or linked into another directory (REFER), as git does.
#define MIN_ABI 2
// From ABI 6 abstract unix sockets and signals can be scoped.
#define SCOPE_ABI 6

// The setting that lowers the ABI used, to try what an older kernel
// gives: never above what this one gives.
#define ABI_MAX_ENV "MARSHAL_LANDLOCK_ABI_MAX"

struct rule rules[MAX_RULES];
int nrules;
// The rules of --hide, which alone are no filesystem confinement.
static int nhide;
static int fs_default = -1;
static const char *tmpdir;
static int abi;
static int need_mounts;
int want_shm;

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
		// ACCESS[@ORIGIN]:PATH, ORIGIN the rule's field path, for a
		// refusal to name.
		const char *colon = strchr(value, ':');
		const char *at = colon ? memchr(value, '@', (size_t)(colon - value)) : NULL;
		const char *end = at ? at : colon;
		int a = colon ? access_of(value, (size_t)(end - value)) : -1;
		if (a < 0 || colon[1] != '/')
			usage("--fs takes none, read or write, optionally '@' and the rule's field path, ':' and an absolute path");
		if (nrules == MAX_RULES)
			usage("too many --fs rules");
		rules[nrules].access = a;
		rules[nrules].path = colon + 1;
		rules[nrules].origin = at ? strndup(at + 1, (size_t)(colon - at - 1)) : NULL;
		nrules++;
		return 1;
	}
	if (strcmp(flag, "--hide") == 0) {
		// A host service's socket (see hide_paths); with --fs rules,
		// the same as --fs none:PATH.
		if (*value != '/')
			usage("--hide needs an absolute path");
		if (nrules == MAX_RULES)
			usage("too many --fs and --hide rules");
		rules[nrules++] = (struct rule){.access = FS_NONE, .path = value};
		nhide++;
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
	return fs_default >= 0 || nrules > nhide || tmpdir;
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

// fd_name is the name of what fd holds, as /proc says it; 0 when it
// cannot say.
int fd_name(int fd, char *buf, size_t size)
{
	char link[32];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, buf, size - 1);
	if (n <= 0 || buf[0] != '/' || (size_t)n >= size - 1)
		return 0;
	buf[n] = '\0';
	return 1;
}

// blocker finds the directory that keeps this user from resolving path:
// the last one reached whose search permission is refused, following
// symlinks as the kernel does. 0 when none is found (a path changed
// meanwhile, or refused by something other than a directory's mode).
static int blocker(const char *path, char *dir, size_t size)
{
	char cur[PATH_MAX];
	if (snprintf(cur, sizeof cur, "%s", path) >= (int)sizeof cur)
		return 0;
	for (int links = 0; links < 40; links++) {
		// at: the directory reached so far, as /proc names it.
		int at = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
		const char *p = cur;
		for (;;) {
			while (*p == '/')
				p++;
			const char *end = strchrnul(p, '/');
			if (at < 0 || end == p)
				break;
			char comp[NAME_MAX + 1], target[PATH_MAX];
			if ((size_t)(end - p) > NAME_MAX)
				break;
			memcpy(comp, p, (size_t)(end - p));
			comp[end - p] = '\0';
			struct stat st;
			if (fstatat(at, comp, &st, AT_SYMLINK_NOFOLLOW) != 0) {
				int found = (errno == EACCES || errno == EPERM) && fd_name(at, dir, size);
				close(at);
				return found;
			}
			if (S_ISLNK(st.st_mode)) {
				// Go on from where the link leads, with the rest.
				ssize_t n = readlinkat(at, comp, target, sizeof target - 1);
				char base[PATH_MAX];
				if (n <= 0 || !fd_name(at, base, sizeof base))
					break;
				target[n] = '\0';
				char next[PATH_MAX];
				int w = target[0] == '/' ? snprintf(next, sizeof next, "%s%s", target, end)
							 : snprintf(next, sizeof next, "%s/%s%s", base, target, end);
				if (w < 0 || w >= (int)sizeof next)
					break;
				memcpy(cur, next, (size_t)w + 1);
				close(at);
				at = -2; // restart from /
				break;
			}
			int next = openat(at, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
			close(at);
			at = next;
			p = end;
		}
		if (at != -2) {
			if (at >= 0)
				close(at);
			return 0;
		}
	}
	return 0;
}

// owns says whether this user may change the mode of what st describes,
// as the agent, with the same user, may: its owner, or root (who may
// change any mode).
static int owns(const struct stat *st)
{
	uid_t uid = geteuid();
	return uid == 0 || st->st_uid == uid;
}

// unreachable decides a rule whose path this user cannot resolve
// (EACCES or EPERM). A rule that only grants is skipped: what cannot be
// reached is not granted. A rule that hides or narrows (none, and read,
// which narrows a write tree) is skipped only where the kernel itself
// keeps the agent out for good: the directory that refuses the lookup
// is another user's, so the agent, holding no capability over it, can
// neither change its mode nor its ACL. Where the agent could get past
// it (its own directory, which it may chmod; one in a directory it owns
// or may write, which it may rename aside for one of its own, sticky
// directories but for their owners excepted) the rule cannot be given
// and the launch is refused: the profile said to hide the path. Moving
// aside a directory higher up moves the blocker with it, still closed.
static void unreachable(const struct rule *r, int err)
{
	if (r->access == FS_WRITE)
		return;
	const char *access = r->access == FS_NONE ? "none" : "read";
	char rule[PATH_MAX + 160], dir[PATH_MAX], what[3 * PATH_MAX + 160];
	if (r->origin && *r->origin)
		snprintf(rule, sizeof rule, "%s (%s:%s)", r->origin, access, r->path);
	else
		snprintf(rule, sizeof rule, "the rule %s:%s", access, r->path);
	struct stat st, pst;
	if (!blocker(r->path, dir, sizeof dir) || stat(dir, &st) != 0) {
		snprintf(what, sizeof what, "%s cannot be given: its path is out of this user's reach, and what refuses it was not found", rule);
		unsupported(what, err);
	}
	const char *why = NULL;
	if (owns(&st)) {
		why = "the launching user's own: the agent could change its mode";
	} else if (strcmp(dir, "/") != 0) {
		char parent[PATH_MAX];
		snprintf(parent, sizeof parent, "%s", dir);
		char *slash = strrchr(parent, '/');
		slash[slash == parent ? 1 : 0] = '\0';
		if (stat(parent, &pst) == 0 &&
		    (owns(&pst) || (!(pst.st_mode & S_ISVTX) && faccessat(AT_FDCWD, parent, W_OK, AT_EACCESS) == 0)))
			why = "in a directory the launching user owns or may write: the agent could move it aside for its own";
	}
	if (why == NULL)
		return; // another user's, and staying so: the kernel keeps the agent out
	snprintf(what, sizeof what, "%s cannot be given: %s, which keeps this user from it, is %s", rule, dir, why);
	unsupported(what, err);
}

// resolve opens path and returns its name with every symlink followed,
// the name of what the descriptor holds: three system calls where
// realpath makes one per component. NULL when there is nothing there to
// govern (absent, or out of this user's reach, as realpath would say).
static char *resolve(const struct rule *r, int *fd, struct stat *st)
{
	const char *path = r->path;
	*fd = open(path, O_PATH | O_CLOEXEC);
	if (*fd < 0) {
		if (errno == EACCES || errno == EPERM) {
			unreachable(r, errno);
			return NULL;
		}
		if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == ENAMETOOLONG)
			return NULL;
		unsupported("a rule's path could not be resolved", errno);
	}
	char link[32], buf[PATH_MAX];
	snprintf(link, sizeof link, "/proc/self/fd/%d", *fd);
	ssize_t n = fstat(*fd, st) == 0 ? readlink(link, buf, sizeof buf - 1) : -1;
	if (n > 0 && buf[0] == '/' && (size_t)n < sizeof buf - 1) {
		buf[n] = '\0';
		// A name ending so may be a file unlinked meanwhile, or one so
		// named: only the same inode there says which.
		static const char gone[] = " (deleted)";
		struct stat again;
		if ((size_t)n < sizeof gone || strcmp(buf + n - (sizeof gone - 1), gone) != 0 ||
		    (stat(buf, &again) == 0 && again.st_dev == st->st_dev && again.st_ino == st->st_ino))
			return strdup(buf);
	}
	// No /proc, or a name it cannot give: the long way.
	char *real = realpath(path, NULL);
	if (real == NULL || stat(real, st) != 0) {
		free(real);
		close(*fd);
		*fd = -1;
		return NULL;
	}
	return real;
}

// plan resolves the rules and decides each one's mount.
static void plan(void)
{
	for (int i = 0; i < nrules; i++) {
		struct rule *r = &rules[i];
		struct stat st;
		r->fd = r->mnt = -1;
		r->anchor = -1;
		r->real = resolve(r, &r->found, &st);
		if (r->real == NULL)
			continue;
		r->len = strlen(r->real);
		r->isdir = S_ISDIR(st.st_mode);
		// Two rules on one path: the later decides.
		for (int j = 0; j < i; j++)
			if (rules[j].real && strcmp(rules[j].real, r->real) == 0)
				rules[j].real = NULL;
	}
	// Ancestors first: a shorter path is never beneath a longer one;
	// absent paths, length 0, first of all.
	for (int i = 0; i < nrules; i++)
		if (rules[i].real == NULL)
			rules[i].len = 0;
	for (int i = 1; i < nrules; i++) {
		struct rule r = rules[i];
		int j = i - 1;
		for (; j >= 0 && rules[j].len > r.len; j--)
			rules[j + 1] = rules[j];
		rules[j + 1] = r;
	}
	for (int i = 0; i < nrules; i++) {
		struct rule *r = &rules[i];
		if (r->real == NULL)
			continue;
		int granted = fs_default == FS_READ ? FS_READ : FS_NONE;
		for (int j = 0; j < i; j++) {
			struct rule *a = &rules[j];
			if (a->real == NULL || a->len == r->len || !beneath(a, r))
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

// hide_ssh_agent hides the socket of the user's ssh agent, which signs
// with the keys ~/.ssh holds, wherever SSH_AUTH_SOCK puts it (often
// below /tmp, which no default names). It comes first: a rule that
// names the same path comes later and decides.
static void hide_ssh_agent(void)
{
	const char *agent = getenv("SSH_AUTH_SOCK");
	if (agent == NULL || agent[0] != '/')
		return;
	if (nrules == MAX_RULES)
		usage("too many --fs rules");
	memmove(&rules[1], &rules[0], (size_t)nrules * sizeof rules[0]);
	rules[0] = (struct rule){.access = FS_NONE, .path = agent};
	nrules++;
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
	hide_ssh_agent();
	plan();
	// A /dev/shm of the agent's own, writable, unless a rule names it.
	want_shm = 1;
	for (int i = 0; i < nrules; i++)
		if (strcmp(rules[i].path, "/dev/shm") == 0)
			want_shm = 0;
	need_mounts |= want_shm;
}

// hide_paths hides the --hide paths of a launch in a network namespace
// without filesystem rules, in a mount namespace of its own. An agent
// that is not root holds no capability there once exec'd, so cannot
// unmount them; root's are locked, as filesystem confinement locks all.
void hide_paths(void)
{
	if (nhide == 0)
		return;
	plan();
	if (need_mounts)
		make_mounts(1, geteuid() == 0);
}

// try_rule lets the Landlock ruleset grant rights beneath what fd holds
// (Landlock grants to the inode, the same in every mount of it); -1,
// errno set, where Landlock takes no rule on it.
int try_rule(int ruleset, uint64_t handled, int fd, int isdir, uint64_t rights)
{
	struct ll_path_beneath_attr pb = {.allowed_access = rights & handled & (isdir ? ~0ULL : FILE_RIGHTS), .parent_fd = fd};
	return (int)syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &pb, 0);
}

void add_rule(int ruleset, uint64_t handled, const char *path, int fd, int isdir, uint64_t rights)
{
	if (try_rule(ruleset, handled, fd, isdir, rights) != 0) {
		char what[PATH_MAX + 64];
		snprintf(what, sizeof what, "a Landlock rule could not be added for %s", path);
		unsupported(what, errno);
	}
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
		grant_default_read(rs, handled);
	for (int i = 0; i < nrules; i++) {
		struct rule *r = &rules[i];
		if (r->real && r->access != FS_NONE)
			add_rule(rs, handled, r->real, r->found, r->isdir, r->access == FS_WRITE ? WRITE_RIGHTS : READ_RIGHTS);
	}
	if (shm_fd >= 0)
		add_rule(rs, handled, "/dev/shm", shm_fd, 1, WRITE_RIGHTS);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		unsupported("no_new_privs could not be set", errno);
	no_tiocsti();
	if (syscall(SYS_landlock_restrict_self, rs, 0) != 0)
		unsupported("Landlock could not be enforced", errno);
}

void fs_apply(int in_userns)
{
	confining = "filesystem confinement";
	if (need_mounts)
		make_mounts(in_userns, 1);
	// Every descriptor made here is close-on-exec: the exec closes them
	// all, without a system call each.
	restrict_self();
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
