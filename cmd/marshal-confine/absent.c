//go:build linux && cgo

// The default read of filesystem confinement, kept from the none paths
// that do not exist at launch.
//
// A hidden path is a mount, and a mount needs its path to exist. A none
// path absent at launch (~/.aws on a machine without AWS credentials
// yet) would be readable to the agent once somebody made it (aws
// configure while the agent runs): the default read grants everything
// beneath /. Landlock has no deny rule, so instead, each directory on
// the way to such a path is granted its listing only, and each of its
// entries but the one on the way is granted read beneath it: what
// appears in those directories later, the absent path among it, is not
// granted. The price: an entry made after launch directly in one of
// those directories (/, /home, ~) is listed but not readable.
//
// Only a path that nothing else governs is kept so: one beneath a read
// or write rule is that rule's, one beneath a hidden path shows only the
// hiding tmpfs. marshald's own paths and the host's services (rules
// without an origin) are sockets and directories of services, whose
// connections Landlock does not govern. Symlinks among the entries are
// not granted: what one leads to is granted where it is.

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "confine.h"
#include "fs.h"
#include "landlock.h"

#define MAX_SPLIT 64

// The directories on the way to the absent paths: listed, not granted.
static char *split[MAX_SPLIT];
static int nsplit;

// under reports whether path is dir or beneath it.
static int under(const char *dir, const char *path)
{
	size_t n = strlen(dir);
	if (n == 1)
		return 1; // "/"
	return strncmp(dir, path, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

static int is_split(const char *dir)
{
	for (int i = 0; i < nsplit; i++)
		if (strcmp(split[i], dir) == 0)
			return 1;
	return 0;
}

// keep adds dir to the split directories; -1 when there are too many.
static int keep(const char *dir)
{
	if (is_split(dir))
		return 0;
	if (nsplit == MAX_SPLIT)
		return -1;
	split[nsplit++] = strdup(dir);
	return 0;
}

// keep_from keeps every directory from / to dir.
static int keep_from(const char *dir)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof buf, "%s", dir);
	if (keep("/") != 0)
		return -1;
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		if (buf[1] != '\0' && keep(buf) != 0)
			return -1;
		if (c == '\0')
			return 0;
		*p = c;
	}
}

// nearest returns the real name of the nearest ancestor of path that
// exists, NULL when path is not absent or no ancestor can be named.
static char *nearest(const char *path)
{
	int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd >= 0 || (errno != ENOENT && errno != ENOTDIR)) {
		if (fd >= 0)
			close(fd);
		return NULL; // there, or out of reach: not absent
	}
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
		return NULL;
	while (strcmp(buf, "/") != 0) {
		char *slash = strrchr(buf, '/');
		slash[slash == buf ? 1 : 0] = '\0';
		fd = open(buf, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 && errno != ENOENT && errno != ENOTDIR)
			return NULL;
		if (fd < 0)
			continue;
		char real[PATH_MAX];
		int named = fd_name(fd, real, sizeof real);
		close(fd);
		return named ? strdup(real) : NULL;
	}
	return NULL;
}

// plan_split keeps the directories on the way to each absent none path
// that nothing else governs: 0 when there are none, -1 when too many.
static int plan_split(void)
{
	for (int i = 0; i < nrules; i++) {
		const struct rule *r = &rules[i];
		if (r->access != FS_NONE || r->real != NULL || r->origin == NULL)
			continue;
		char *dir = nearest(r->path);
		if (dir == NULL)
			continue;
		int governed = 0;
		for (int j = 0; j < nrules && !governed; j++)
			governed = rules[j].real != NULL && under(rules[j].real, dir);
		int rc = governed ? 0 : keep_from(dir);
		free(dir);
		if (rc != 0)
			return -1;
	}
	return nsplit;
}

// grant_entries grants read beneath each entry of split directory dir
// but those that are split directories and symlinks, and its listing.
static void grant_entries(int ruleset, uint64_t handled, const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (d == NULL) {
		char what[PATH_MAX + 64];
		snprintf(what, sizeof what, "%s could not be listed to keep a none path out of the default read", dir);
		unsupported(what, errno);
	}
	add_rule(ruleset, handled, dir, fd, 1, LL_FS_READ_DIR);
	char path[PATH_MAX];
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 || e->d_type == DT_LNK)
			continue;
		int n = snprintf(path, sizeof path, "%s/%s", strcmp(dir, "/") == 0 ? "" : dir, e->d_name);
		if (n < 0 || (size_t)n >= sizeof path || is_split(path))
			continue;
		int child = openat(fd, e->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (child < 0)
			continue; // gone meanwhile, or out of reach: nothing to grant
		int grant = 1, isdir = e->d_type == DT_DIR;
		if (e->d_type == DT_UNKNOWN) {
			struct stat st;
			grant = fstat(child, &st) == 0 && !S_ISLNK(st.st_mode);
			isdir = grant && S_ISDIR(st.st_mode);
		}
		// An entry Landlock takes no rule on (a namespace file bound
		// there) stays ungranted: narrower, never wider.
		if (grant)
			try_rule(ruleset, handled, child, isdir, READ_RIGHTS);
		// Closed at once: a directory of thousands of entries would
		// otherwise run out of descriptors.
		close(child);
	}
	closedir(d);
}

void grant_default_read(int ruleset, uint64_t handled)
{
	if (plan_split() > 0) {
		for (int i = 0; i < nsplit; i++)
			grant_entries(ruleset, handled, split[i]);
		return;
	}
	// None, or more than this keeps: read beneath /, and a none path
	// made later stays readable, as docs/confinement.md says.
	int root = open("/", O_PATH | O_CLOEXEC);
	if (root < 0)
		unsupported("the root directory could not be opened", errno);
	add_rule(ruleset, handled, "/", root, 1, READ_RIGHTS);
}
