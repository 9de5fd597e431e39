//go:build linux && cgo

// What marshal-confine does before the Go runtime starts, while the process
// is still single-threaded: unshare(CLONE_NEWUSER) refuses a caller with
// more than one thread, and the Go runtime starts several before main.
//
// "marshal-confine exec" is the launching process itself, already in its
// scope: it makes its user and network namespaces, brings up loopback,
// listens on the bridge's address, starts the bridge (a grandchild, in the
// same scope and namespaces, reparented away from the agent), mounts its
// resolver's /etc/resolv.conf (mounts.c) and execs the agent in place, so
// the agent keeps this process's pid, parent, terminal and signals, and
// its exit status is the launch's own. The Go runtime never starts in
// this process. It starts in the bridge, and only once a first connection
// or question arrives: an agent that never uses the network costs one
// sleeping process.
//
// "marshal-confine check" makes the same namespaces and exits: whether netns
// isolation is available to this user here.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/capability.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "confine.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

// What the Go side of the bridge reads; set in the bridge process only.
int marshal_confine_bridge;
int marshal_confine_listen_fd = -1;
int marshal_confine_dns_fd = -1;
int marshal_confine_agent_fd = -1;
const char *marshal_confine_socket;


// The bridge's fds, as the Go side finds them.
enum { BRIDGE_LISTEN_FD = 3, BRIDGE_AGENT_FD = 4, BRIDGE_DNS_FD = 5 };

struct options {
	int host_network;     // --network host: no network namespace
	const char *socket;   // the egress proxy's unix socket; NULL: no bridge
	int port;             // the bridge's port on 127.0.0.1
	const char *attempt;  // for a refusal's second line
	const char *argv0;    // the agent's argv[0], when not its path
	int json;             // a refusal is one JSON object on stdout
	char **argv;          // the agent: path, then its arguments
};

static struct options opts = {.port = 3128};

// The process's arguments as the kernel shows them (/proc/PID/cmdline),
// which the bridge overwrites with its own name.
static char **args;
static int nargs;

// refuse prints a refusal as marshalctl run prints one and exits: the
// agent was not started.
void refuse(int status, const char *code, const char *detail)
{
	const char *attempt = opts.attempt && *opts.attempt ? opts.attempt : NULL;
	if (opts.json) {
		// Details are fixed phrases and numbers, attempts hex digits:
		// nothing here needs escaping but what strerror may say.
		printf("{\n    \"code\": \"%s\",\n    \"detail\": \"", code);
		for (const char *p = detail; *p; p++) {
			if (*p == '"' || *p == '\\')
				putchar('\\');
			if ((unsigned char)*p >= ' ')
				putchar(*p);
		}
		printf("\",\n");
		if (attempt)
			printf("    \"attempt\": \"%s\",\n", attempt);
		printf("    \"process\": %d,\n    \"state\": \"cancelled\"\n}\n", getpid());
		fflush(stdout);
	} else {
		fprintf(stderr, "%s: %s\nattempt %s, process %d, state cancelled; nothing was started\n",
			code, detail, attempt ? attempt : "-", getpid());
	}
	_exit(status);
}

// confining names what is being made, for a refusal: netns isolation,
// or filesystem confinement.
const char *confining = "netns isolation";

// unsupported refuses the launch: the isolation being made (confining)
// could not be had, for the reason what names, with errno err.
void unsupported(const char *what, int err)
{
	char detail[512];
	snprintf(detail, sizeof detail, "%s unavailable: %s (errno %d)", confining, what, err);
	refuse(EXIT_UNSUPPORTED, "ISOLATION_UNSUPPORTED", detail);
}

void usage(const char *msg)
{
	fprintf(stderr, "marshal-confine: %s\n"
		"usage: marshal-confine exec [--network none|host] [--socket PATH] [--port N] [--attempt ID] [--argv0 NAME] [--output json]\n"
		"                            [--fs-default read|none] [--fs none|read|write[@FIELD]:PATH]... [--tmp PATH] [--hide PATH]... -- PROGRAM [ARG...]\n"
		"       marshal-confine check [--fs]\n", msg);
	_exit(EXIT_USAGE);
}

static void parse(int argc, char **argv)
{
	int i = 2;
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (i + 1 >= argc)
			usage("a flag needs a value, and the program follows --");
		const char *v = argv[++i];
		if (fs_flag(a, v)) {
			continue;
		} else if (strcmp(a, "--network") == 0) {
			if (strcmp(v, "host") != 0 && strcmp(v, "none") != 0)
				usage("--network is host or none");
			opts.host_network = strcmp(v, "host") == 0;
		} else if (strcmp(a, "--socket") == 0) {
			if (*v != '/')
				usage("--socket needs an absolute path");
			opts.socket = v;
		} else if (strcmp(a, "--port") == 0) {
			char *end;
			long p = strtol(v, &end, 10);
			if (*v == '\0' || *end != '\0' || p < 1 || p > 65535)
				usage("--port needs a number from 1 to 65535");
			opts.port = (int)p;
		} else if (strcmp(a, "--attempt") == 0) {
			opts.attempt = v;
		} else if (strcmp(a, "--argv0") == 0) {
			opts.argv0 = v;
		} else if (strcmp(a, "--output") == 0) {
			if (strcmp(v, "json") != 0)
				usage("--output knows only json");
			opts.json = 1;
		} else {
			usage("unknown flag");
		}
	}
	if (i >= argc || argv[i][0] == '\0')
		usage("no program after --");
	opts.argv = argv + i;
}

// write_file writes s to path at once, as /proc's id map files need.
int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = strlen(s);
	ssize_t w = write(fd, s, n);
	int err = errno;
	close(fd);
	if (w != (ssize_t)n) {
		errno = w < 0 ? err : EIO;
		return -1;
	}
	return 0;
}

// unshare_as_user makes the namespaces for an ordinary user: its uid and
// gid mapped to themselves, as bubblewrap maps them, setgroups denied (an
// unprivileged gid map needs it). The process holds every capability in
// its new user namespace until it execs the agent, which, not being
// root, then holds none.
static void unshare_as_user(uid_t uid, gid_t gid, int flags)
{
	char map[64];
	if (unshare(CLONE_NEWUSER | flags) != 0) {
		int err = errno;
		switch (err) {
		case EPERM:
			unsupported("user namespaces are not permitted here (a sysctl, a security module or a seccomp policy forbids them)", err);
		case ENOSPC:
			unsupported("the user namespace limit is reached (user.max_user_namespaces)", err);
		case EINVAL:
			unsupported("this kernel does not support the namespaces needed", err);
		default:
			unsupported("the user namespace could not be made", err);
		}
	}
	if (write_file("/proc/self/setgroups", "deny\n") != 0 && errno != ENOENT)
		unsupported("setgroups could not be denied in the user namespace", errno);
	snprintf(map, sizeof map, "%u %u 1\n", uid, uid);
	if (write_file("/proc/self/uid_map", map) != 0)
		unsupported("the uid map of the user namespace could not be written", errno);
	snprintf(map, sizeof map, "%u %u 1\n", gid, gid);
	if (write_file("/proc/self/gid_map", map) != 0)
		unsupported("the gid map of the user namespace could not be written", errno);
}

// unshare_as_root makes the namespaces for root: every id mapped to
// itself, so that root inside is root for every file, while its
// capabilities hold only in the new namespaces and never again in the
// host's network namespace. A full map needs CAP_SETUID in the parent
// user namespace, which this process gives up by unsharing, so a child
// left behind there writes it.
// The id mapper shares this process's memory (CLONE_VM): no page tables
// are copied, which a fork of even a small process costs, twice per
// confined launch of root. It touches only its own stack and arguments,
// and errno, which it reports by its exit status.
struct mapper_args {
	int sync, done; // the pipe's ends: read, and the parent's write end
	pid_t target;
};

static char mapper_stack[32 * 1024] __attribute__((aligned(16)));

static int mapper(void *p)
{
	struct mapper_args *a = p;
	char path[64], c;
	close(a->done); // its own copy: the parent's close must end the read
	if (read(a->sync, &c, 1) != 1)
		return 0; // the parent failed to unshare and says so
	snprintf(path, sizeof path, "/proc/%d/uid_map", a->target);
	if (write_file(path, "0 0 4294967295\n") != 0)
		return errno & 0xff ? errno & 0xff : EIO;
	snprintf(path, sizeof path, "/proc/%d/gid_map", a->target);
	if (write_file(path, "0 0 4294967295\n") != 0)
		return errno & 0xff ? errno & 0xff : EIO;
	return 0;
}

static void unshare_as_root(int flags)
{
	int sync[2];
	if (pipe2(sync, O_CLOEXEC) != 0)
		unsupported("the id mapper could not be started", errno);
	struct mapper_args args = {.sync = sync[0], .done = sync[1], .target = getpid()};
	pid_t pid = clone(mapper, mapper_stack + sizeof mapper_stack, CLONE_VM | SIGCHLD, &args);
	if (pid < 0)
		unsupported("the id mapper could not be started", errno);
	int rc = unshare(CLONE_NEWUSER | flags);
	int err = errno;
	if (rc == 0 && write(sync[1], "x", 1) != 1)
		err = errno, rc = -1;
	close(sync[1]);
	int status = -1; // not an exit: a failed wait fails the launch
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	close(sync[0]);
	if (rc != 0) {
		if (err == ENOSPC)
			unsupported("the user namespace limit is reached (user.max_user_namespaces)", err);
		if (err == EINVAL)
			unsupported("this kernel does not support the namespaces needed", err);
		unsupported("the user namespace could not be made (a seccomp policy may forbid it)", err);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		unsupported("the id maps of the user namespace could not be written", WIFEXITED(status) ? WEXITSTATUS(status) : EIO);
}

// loopback_up brings up lo, the only interface of a new network
// namespace.
static void loopback_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		unsupported("the loopback interface could not be brought up", errno);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
		unsupported("the loopback interface could not be brought up", errno);
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
		unsupported("the loopback interface could not be brought up (a security module may deny capabilities in user namespaces)", errno);
	close(s);
}

// unshare_user makes a user namespace with the namespaces flags names,
// this process's ids mapped to themselves.
void unshare_user(int flags)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	if (uid == 0)
		unshare_as_root(flags);
	else
		unshare_as_user(uid, gid, flags);
}

// isolate makes the namespaces and brings up loopback. Every port of
// the namespace is left unprivileged, so that the bridge, which keeps no
// capability, may listen on the placeholders' ports 80 and 443: the
// namespace has only loopback, and nothing beyond it to guard.
static void isolate(void)
{
	unshare_user(CLONE_NEWNET);
	loopback_up();
	if (write_file("/proc/sys/net/ipv4/ip_unprivileged_port_start", "0") != 0)
		unsupported("the namespace's unprivileged ports could not be set", errno);
}

// listen_bridge listens on the bridge's address inside the namespace.
static int listen_bridge(int port)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		unsupported("the bridge could not listen", errno);
	struct sockaddr_in addr;
	memset(&addr, 0, sizeof addr);
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t)port);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(s, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(s, SOMAXCONN) != 0)
		unsupported("the bridge could not listen", errno);
	return s;
}

// listen_dns binds the agent's resolver, the bridge's, to 127.0.0.1:53
// (UDP) inside the namespace, which this process may as root of its
// user namespace.
static int listen_dns(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		unsupported("the bridge's resolver could not listen", errno);
	struct sockaddr_in addr;
	memset(&addr, 0, sizeof addr);
	addr.sin_family = AF_INET;
	addr.sin_port = htons(53);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(s, (struct sockaddr *)&addr, sizeof addr) != 0)
		unsupported("the bridge's resolver could not listen on 127.0.0.1:53", errno);
	return s;
}

// wait_for_work parks the bridge until a first connection is waiting, and
// exits at once when the agent exits first: the Go runtime starts only
// for a bridge that has work.
static void wait_for_work(void)
{
	struct pollfd fds[3] = {
		{.fd = BRIDGE_LISTEN_FD, .events = POLLIN},
		{.fd = BRIDGE_AGENT_FD, .events = POLLIN},
		{.fd = BRIDGE_DNS_FD, .events = POLLIN},
	};
	for (;;) {
		int n = poll(fds, 3, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || fds[1].revents)
			_exit(0);
		if (fds[0].revents || fds[2].revents)
			return;
	}
}

// rename_bridge names the bridge in ps and top for what it is, not for
// the agent's command line it inherited: comm, and the arguments' memory
// overwritten in place. The socket's path, which lives there, is copied
// first.
static void rename_bridge(void)
{
	static const char name[] = "marshal-confine bridge";
	opts.socket = strdup(opts.socket);
	if (opts.socket == NULL)
		_exit(1);
	prctl(PR_SET_NAME, "marshal-bridge", 0, 0, 0);
	char *start = args[0], *end = args[nargs - 1] + strlen(args[nargs - 1]);
	memset(start, 0, (size_t)(end - start));
	if ((size_t)(end - start) >= sizeof name)
		memcpy(start, name, sizeof name);
}

// hand_off_fds leaves the intermediate process holding only what the
// bridge needs: the listener, the agent's pidfd and the resolver's
// socket as fds 3, 4 and 5, and
// /dev/null as its standard streams. Whatever else the agent was handed
// stays the agent's: a pipe the bridge held open would outlive the agent,
// and a reader waiting for its end (a shell's command substitution) would
// wait for the bridge. It is done before the bridge is forked, so that the
// launching process, which waits for the intermediate, execs the agent
// only once no copy is left.
static void hand_off_fds(int listener, int agent, int dns)
{
	// Out of the way first, so that none lands on another's place.
	int l = fcntl(listener, F_DUPFD_CLOEXEC, 10);
	int a = fcntl(agent, F_DUPFD_CLOEXEC, 10);
	int d = fcntl(dns, F_DUPFD_CLOEXEC, 10);
	if (l < 0 || a < 0 || d < 0 || dup3(l, BRIDGE_LISTEN_FD, O_CLOEXEC) < 0 ||
	    dup3(a, BRIDGE_AGENT_FD, O_CLOEXEC) < 0 || dup3(d, BRIDGE_DNS_FD, O_CLOEXEC) < 0)
		_exit(1);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0)
		_exit(1);
	for (int fd = 0; fd <= 2; fd++)
		if (null != fd && dup2(null, fd) < 0)
			_exit(1);
	if (syscall(SYS_close_range, BRIDGE_DNS_FD + 1, ~0U, 0) != 0) {
		for (int fd = BRIDGE_DNS_FD + 1; fd < 1024; fd++)
			close(fd);
	}
}

// ready_bridge makes the intermediate what the bridge is to be, before
// it forks the bridge: in its own session (made already), away from the
// agent's terminal and its signals, without capabilities, named
// marshal-bridge. The bridge is then all that from its first instant,
// before the agent runs: nothing of the agent's command or capabilities
// is ever seen in it.
static void ready_bridge(void)
{
	// The capabilities this process has in its new user namespace are
	// no use to a relay.
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3];
	memset(caps, 0, sizeof caps);
	if (syscall(SYS_capset, &hdr, caps) != 0)
		_exit(1);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	rename_bridge();
}

// become_bridge turns the grandchild into the bridge: parked until there
// is work, then handed to the Go runtime.
static void become_bridge(void)
{
	wait_for_work();
	marshal_confine_bridge = 1;
	marshal_confine_listen_fd = BRIDGE_LISTEN_FD;
	marshal_confine_agent_fd = BRIDGE_AGENT_FD;
	marshal_confine_dns_fd = BRIDGE_DNS_FD;
	marshal_confine_socket = opts.socket;
}

// start_bridge starts the bridge as a grandchild, so that it is no child
// of the agent's (nothing the agent waits for, no SIGCHLD it did not ask
// for), and returns in this process. In the bridge it returns too, and
// the Go runtime starts.
static int start_bridge(int listener, int dns)
{
	// The agent is this process, which the pidfd names across the exec.
	int agent = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (agent < 0)
		unsupported(errno == ENOSYS ? "this kernel has no pidfd_open (Linux 5.3 or later is needed)" : "the agent's pidfd could not be opened", errno);
	pid_t mid = fork();
	if (mid < 0)
		unsupported("the bridge could not be started", errno);
	if (mid == 0) {
		if (setsid() < 0)
			_exit(1);
		hand_off_fds(listener, agent, dns);
		ready_bridge();
		pid_t bridge = fork();
		if (bridge != 0)
			_exit(bridge < 0);
		become_bridge();
		return 1;
	}
	int status;
	while (waitpid(mid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		unsupported("the bridge could not be started", EAGAIN);
	close(agent);
	close(listener);
	close(dns);
	return 0;
}

static void exec_agent(void)
{
	char *path = opts.argv[0];
	if (opts.argv0)
		opts.argv[0] = (char *)opts.argv0;
	extern char **environ;
	execvpe(path, opts.argv, environ);
	char detail[512];
	snprintf(detail, sizeof detail, "exec %s: %s", path, strerror(errno));
	refuse(EXIT_INTERNAL, "INTERNAL", detail);
}

__attribute__((constructor)) static void marshal_confine_init(int argc, char **argv, char **envp)
{
	(void)envp;
	if (argc < 2)
		return;
	args = argv;
	nargs = argc;
	if (strcmp(argv[1], "check") == 0) {
		if (argc > 2 && strcmp(argv[2], "--fs") == 0) {
			confining = "filesystem confinement";
			fs_check();
			_exit(0);
		}
		isolate();
		close(listen_bridge(opts.port));
		close(listen_dns());
		mount_resolver();
		_exit(0);
	}
	if (strcmp(argv[1], "exec") != 0)
		return;
	parse(argc, argv);
	if (opts.host_network && opts.socket)
		usage("--socket needs --network none");
	if (fs_enabled())
		fs_prepare();
	if (!opts.host_network) {
		isolate();
		if (opts.socket) {
			int listener = listen_bridge(opts.port);
			if (start_bridge(listener, listen_dns()))
				return; // the bridge: the Go runtime takes over
			mount_resolver();
		}
		if (!fs_enabled())
			hide_paths();
	}
	if (fs_enabled())
		fs_apply(!opts.host_network);
	exec_agent();
}
