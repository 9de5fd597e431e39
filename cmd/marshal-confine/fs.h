// What fs.c and mounts.c share: the rules, resolved and planned.

#ifndef MARSHAL_CONFINE_FS_H
#define MARSHAL_CONFINE_FS_H

#include <stddef.h>

enum { FS_NONE, FS_READ, FS_WRITE };
// The mount a rule needs: none, hide the path, bind it read-only, or
// bind it back writable inside a hidden or read-only tree.
enum { OP_NONE, OP_HIDE, OP_RO, OP_RW };

#define MAX_RULES 128

// A rule is small: a launch touches each one several times, and every
// page it spans is a page fault, which costs more than the work here.
struct rule {
	int access;
	const char *path;    // as given
	const char *origin;  // its field path, for a refusal; NULL when none
	char *real;          // resolved; NULL when it does not exist
	size_t len;
	int isdir;
	int op;              // the mount that narrows or restores it
	int anchor;          // the nearest ancestor with an op, -1 for none
	int children;        // ops anchored at it
	int found;           // O_PATH, as resolved: what Landlock grants
	int fd;              // O_PATH, in the agent's mount namespace
	int mnt;             // the root of the mount its op made
	char veiled[16];     // what shows in its place: a name in the veil
};

// The rules, ancestors first once planned.
extern struct rule rules[MAX_RULES];
extern int nrules;
// want_shm says the agent gets a /dev/shm of its own; shm_fd is its root
// once mounted, -1 until then.
extern int want_shm;
extern int shm_fd;

// make_mounts makes the rules' mounts in a mount namespace of their own,
// and, when lock says so, locks them in a user and mount namespace below
// it. in_userns says whether this process already made its user
// namespace.
void make_mounts(int in_userns, int lock);
// fd_name puts the name of what fd holds, as /proc says it, in buf; 0
// when it cannot say.
int fd_name(int fd, char *buf, size_t size);
// new_tmpfs returns an unattached, empty tmpfs whose root has mode.
int new_tmpfs(const char *mode);

#endif
