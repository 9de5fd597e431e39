// What confine.c and fs.c share: the refusals, the user namespace, and
// the filesystem confinement's steps.

#ifndef MARSHAL_CONFINE_H
#define MARSHAL_CONFINE_H

// Exit statuses, as marshalctl run's: 78 ISOLATION_UNSUPPORTED
// (EX_CONFIG), 70 INTERNAL (EX_SOFTWARE), 2 a usage error.
enum { EXIT_UNSUPPORTED = 78, EXIT_INTERNAL = 70, EXIT_USAGE = 2 };

extern const char *confining;
void refuse(int status, const char *code, const char *detail) __attribute__((noreturn));
void unsupported(const char *what, int err) __attribute__((noreturn));
void usage(const char *msg) __attribute__((noreturn));
int write_file(const char *path, const char *s);
void unshare_user(int flags);

// fs_flag takes a filesystem flag and its value; 0 when flag is not one.
int fs_flag(const char *flag, const char *value);
// fs_enabled says whether a filesystem flag was given.
int fs_enabled(void);
// fs_prepare checks what the host gives, makes {tmp} and resolves the
// rules, before any namespace is made.
void fs_prepare(void);
// fs_apply confines this process: mounts where a path must be hidden or
// read-only inside a granted tree, then no_new_privs, the seccomp filter
// and Landlock. in_userns says whether this process already made its
// user namespace.
void fs_apply(int in_userns);
// mount_resolver puts the bridge's resolver in the agent's
// /etc/resolv.conf, in a mount namespace of its own.
void mount_resolver(void);
// hide_paths hides the --hide paths where there are no filesystem rules.
void hide_paths(void);
// no_tiocsti installs the seccomp filter that refuses TIOCSTI and
// TIOCLINUX.
void no_tiocsti(void);
// fs_check tries what fs_apply needs and exits.
void fs_check(void) __attribute__((noreturn));

#endif
