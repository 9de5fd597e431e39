#!/bin/sh
# systemd-user-manager.sh runs a throwaway systemd user manager for tests.
#
# Usage: systemd-user-manager.sh RUNTIME_DIR TARGET CGROUP_DIR...
#
#   RUNTIME_DIR  an existing private (0700) directory; it becomes the
#                manager's XDG_RUNTIME_DIR, so its bus is at RUNTIME_DIR/bus
#                and its private socket at RUNTIME_DIR/systemd/private.
#   TARGET       the name of the unit to start, ending in ".target"; this
#                script writes it to RUNTIME_DIR/systemd/user/TARGET and it
#                pulls in only dbus.socket.
#   CGROUP_DIR   existing, empty cgroup directories the manager runs in, one
#                per hierarchy it needs: the cgroup2 group and, on a hybrid
#                host, the group of the same name in the name=systemd
#                hierarchy. They become the manager's root cgroup.
#
# The script moves itself into every CGROUP_DIR, enters a new mount
# namespace with private propagation, mounts a tmpfs on /run/systemd with an
# empty /run/systemd/system directory in it (the manager checks that
# directory to decide it runs under systemd), and execs
# `systemd --user --unit=TARGET` in place: the pid of this script is the
# manager's pid. The caller stops the manager with SIGTERM to that pid, then
# kills what is left in CGROUP_DIR (cgroup.kill) and removes the
# directories, which it created.
#
# It never starts a system manager: that would run tmpfiles and empty the
# shared /tmp. The tmpfs lives only in the new mount namespace and goes
# away with its last process.
#
# Environment: SYSTEMD (default /usr/lib/systemd/systemd); SYSTEMD_LOG_TARGET
# (default console: the manager logs to this script's stderr, never to the
# host's kernel log) and SYSTEMD_LOG_LEVEL (default notice); HOME and the XDG
# base directories are pointed inside RUNTIME_DIR so that the manager reads
# no unit and writes no state outside it. The tmpfs is named
# "marshal-test-manager:RUNTIME_DIR", so a caller can tell from mountinfo
# that it never leaked into its own namespace.
set -eu

die() {
	echo "systemd-user-manager.sh: $*" >&2
	exit 1
}

[ $# -ge 3 ] || die "usage: systemd-user-manager.sh RUNTIME_DIR TARGET CGROUP_DIR..."
runtime_dir=$1
target=$2
shift 2

systemd=${SYSTEMD:-/usr/lib/systemd/systemd}
[ "$(id -u)" -eq 0 ] || die "needs root"
[ -x "$systemd" ] || die "no systemd at $systemd"
command -v unshare >/dev/null 2>&1 || die "no unshare"
[ -d /run/systemd ] || die "no /run/systemd to mount a tmpfs on"
case $runtime_dir in
/*) ;;
*) die "RUNTIME_DIR must be absolute: $runtime_dir" ;;
esac
[ -d "$runtime_dir" ] || die "RUNTIME_DIR $runtime_dir does not exist"
case $target in
*/* | .* | "") die "bad TARGET: $target" ;;
*.target) ;;
*) die "TARGET must end in .target: $target" ;;
esac

mkdir -p "$runtime_dir/systemd/user" "$runtime_dir/home"
printf '[Unit]\nDescription=Throwaway test manager\nWants=dbus.socket\n' >"$runtime_dir/systemd/user/$target"

for dir in "$@"; do
	[ -f "$dir/cgroup.procs" ] || die "not a cgroup directory: $dir"
	echo $$ >"$dir/cgroup.procs"
done

# A clean environment: nothing of the caller's session (its bus address,
# its XDG dirs) may leak into the manager.
exec env -i \
	PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME="$runtime_dir/home" \
	XDG_RUNTIME_DIR="$runtime_dir" \
	XDG_CONFIG_HOME="$runtime_dir/home/.config" \
	XDG_DATA_HOME="$runtime_dir/home/.local/share" \
	XDG_STATE_HOME="$runtime_dir/home/.local/state" \
	XDG_CACHE_HOME="$runtime_dir/home/.cache" \
	SYSTEMD_LOG_TARGET="${SYSTEMD_LOG_TARGET:-console}" \
	SYSTEMD_LOG_LEVEL="${SYSTEMD_LOG_LEVEL:-notice}" \
	unshare --mount --propagation private -- /bin/sh -c '
		set -e
		mount -t tmpfs -o mode=0755,size=1m "marshal-test-manager:$2" /run/systemd
		mkdir /run/systemd/system
		exec "$0" --user --unit="$1"
	' "$systemd" "$target" "$runtime_dir"
