#!/bin/sh
# unprivileged.sh runs a make target (default: test) as an ordinary user,
# to show what a developer without root sees: every test that needs root
# skips with its reason, and the rest pass.
#
# Usage (as root, from the module root):
#
#	test/unprivileged.sh [USER [TARGET [VARIABLE=value...]]]
#
#   USER    the account to run as; default nobody. It needs no home and no
#           shell: the script gives it its own copy of the tree, module
#           cache and HOME in a temporary directory, owned by it and
#           removed afterwards, and build caches of its own that are kept
#           for the next run ($MARSHAL_UNPRIVILEGED_CACHE/UID, default
#           /var/cache/marshal-unprivileged/UID).
#   TARGET  the make target; default test. Any further arguments go to
#           make, such as TESTFLAGS=-v or PKGS=./controllers/...
#
# The module cache is filled from root's, so nothing is downloaded; the Go
# toolchain is the one on root's PATH, and make lint's staticcheck is
# built from the modules tools/lint pins.
set -eu

user=${1:-nobody}
target=${2:-test}
shift $(($# < 2 ? $# : 2))

if [ "$(id -u)" -ne 0 ]; then
	echo "unprivileged.sh: run as root; it switches to $user itself" >&2
	exit 2
fi
uid=$(id -u "$user")
gid=$(id -g "$user")
if [ "$uid" -eq 0 ]; then
	echo "unprivileged.sh: $user is root; name an ordinary user" >&2
	exit 2
fi

goroot=$(go env GOROOT)
modcache=$(go env GOMODCACHE)

work=$(mktemp -d "${TMPDIR:-/tmp}/marshal-unprivileged.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
mkdir -p "$work/src" "$work/home" "$work/tmp" "$work/gopath/bin"
# The user's build and staticcheck caches outlive the run, so that a second
# run compiles only what changed (both caches are keyed by content). Only
# the user may open them.
cache=${MARSHAL_UNPRIVILEGED_CACHE:-/var/cache/marshal-unprivileged}/$uid
mkdir -p "$cache"
chown "$uid:$gid" "$cache"
chmod 0700 "$cache"

# The tree as it is, uncommitted changes included, without build output.
tar -c --exclude=./.git --exclude=./bin --exclude=./.marshal . | tar -x -C "$work/src"
# The tests against a Kubernetes API server run the kube-apiserver and
# etcd that $MARSHAL_KUBE_APISERVER and $MARSHAL_ETCD name: a copy of the
# first, which may sit where the user cannot read; the second as it is.
# An empty one is as if unset.
kubeapi=
if [ -n "${MARSHAL_KUBE_APISERVER:-}" ]; then
	kubeapi="$work/gopath/bin/kube-apiserver"
	cp "$MARSHAL_KUBE_APISERVER" "$kubeapi"
fi
# The modules the build, the tests and make lint need, from root's module
# cache, which holds them once root has downloaded them (a no-op when it
# has).
for mod in . tools/lint; do
	(cd "$mod" && go mod download)
done
for mod in "$work/src" "$work/src/tools/lint"; do
	(cd "$mod" && GOMODCACHE="$work/gopath/pkg/mod" GOFLAGS=-modcacherw \
		GOPROXY="file://$modcache/cache/download" GOSUMDB=off go mod download)
done
chown -R "$uid:$gid" "$work"
chmod 0755 "$work"

echo "unprivileged.sh: make $target as $user (uid $uid) in $work/src"
setpriv --reuid="$uid" --regid="$gid" --clear-groups \
	env -i \
	PATH="$work/gopath/bin:$goroot/bin:/usr/local/bin:/usr/bin:/bin" \
	HOME="$work/home" \
	TMPDIR="$work/tmp" \
	GOROOT="$goroot" \
	GOPATH="$work/gopath" \
	GOCACHE="$cache/go" \
	XDG_CACHE_HOME="$cache" \
	GOFLAGS="-modcacherw -buildvcs=false" \
	GOPROXY=off \
	GOTOOLCHAIN=local \
	MARSHAL_KUBE_APISERVER="$kubeapi" \
	MARSHAL_ETCD="${MARSHAL_ETCD:-}" \
	make -C "$work/src" "$target" "$@"
