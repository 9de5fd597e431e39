#!/bin/sh
# cgroupv2-check.sh checks marshal on this host's cgroups, on a machine
# without Go: it runs the cgroup-touching test binaries and walks the real
# marshald and marshalctl through a governed launch, printing one line per
# check ("ok" or "FAIL", then what was checked) and exiting 1 if any
# failed. It is made for pure cgroup v2 hosts; on a hybrid one the limits
# are cgroup v1's and the checks of v2 files say so and pass over them.
#
# Build the bundle where Go is (make cgroupv2-bundle), copy it over, and
# run as root from inside it:
#
#	tar -xzf marshal-cgroupv2-check.tar.gz && cd marshal-cgroupv2-check && ./cgroupv2-check.sh
#
# It makes its own group below the cgroup2 mount, marshal-check-PID, and
# state in a temporary directory, and removes both when done; it touches
# no other group.
set -u

here=$(cd "$(dirname "$0")" && pwd)
failed=0

ok() { echo "ok   $*"; }
fail() {
	echo "FAIL $*"
	failed=1
}

if [ "$(id -u)" -ne 0 ]; then
	echo "cgroupv2-check.sh: run as root" >&2
	exit 2
fi
mount=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
if [ -z "$mount" ]; then
	echo "cgroupv2-check.sh: no cgroup2 mount" >&2
	exit 2
fi
layout=hybrid
if [ "$(awk '$9 == "cgroup" { n++ } END { print n + 0 }' /proc/self/mountinfo)" -eq 0 ]; then
	layout=v2
fi
echo "host: $(uname -r), cgroup2 at $mount ($layout), root's controllers: $(cat "$mount/cgroup.controllers"), enabled: $(cat "$mount/cgroup.subtree_control")"

# The test binaries, each in a directory of its own (some tests read their
# package's testdata, which the bundle carries beside them).
for t in "$here"/tests/*.test; do
	pkg=$(basename "$t" .test)
	if out=$(cd "$here/tests/$pkg" && "$t" -test.count=1 -test.v 2>&1); then
		ok "tests of $pkg ($(echo "$out" | grep -c -- '--- SKIP' || true) skipped)"
	else
		fail "tests of $pkg:"
		echo "$out" | grep -E -- '--- FAIL|_test.go:[0-9]+' | head -n 20 | sed 's/^/     /'
	fi
done

# The walk: marshald with the cgroupfs backend below a group of its own.
work=$(mktemp -d /tmp/marshal-cgroupv2-check.XXXXXX)
rel=/marshal-check-$$
sock=$work/marshal.sock
mkdir -p "$work/config" "$work/state" "$work/ws"
cat >"$work/config/all.yaml" <<EOF
apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: check}
spec:
  limits: {cpu_milli: 500, memory_bytes: 268435456, tasks: 64}
---
apiVersion: marshal.dev/v1alpha1
kind: Workspace
metadata: {name: web}
spec:
  root: $work/ws
  profile: check
  processes: {max_live: 4}
  resources:
    participation: required
    request:
      cpu_milli: 250
      memory_bytes: 67108864
      tasks: 16
      minimum: {cpu: kernel, memory: kernel, pids: kernel}
EOF
"$here/marshald" --config-dir "$work/config" --state-dir "$work/state" --socket "$sock" \
	--backend cgroupfs --cgroup-root "$rel" --pressure off --egress-address off \
	--egress-socket off >"$work/marshald.log" 2>&1 &
daemon=$!
cleanup() {
	kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
	if [ -d "$mount$rel" ]; then
		echo 1 >"$mount$rel/cgroup.kill" 2>/dev/null
		find "$mount$rel" -depth -type d -exec rmdir {} + 2>/dev/null
		find "$mount$rel" -depth -type d -exec rmdir {} + 2>/dev/null
	fi
	for d in /sys/fs/cgroup/*/; do
		[ -d "$d${rel#/}" ] && find "$d${rel#/}" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	rm -rf "$work"
}
trap cleanup EXIT INT TERM
ctl() { "$here/marshalctl" --socket "$sock" "$@"; }

# marshald is up once the workspace is Ready; a script may poll.
tries=0
until ctl get ws web 2>/dev/null | grep -q True; do
	tries=$((tries + 1))
	if [ "$tries" -gt 100 ] || ! kill -0 "$daemon" 2>/dev/null; then
		fail "marshald did not make workspace web Ready in 20 s:"
		tail -n 20 "$work/marshald.log" | sed 's/^/     /'
		exit 1
	fi
	sleep 0.2
done
ok "marshald up, workspace web Ready"

levels=$(ctl get host local -o jsonpath='{range .status.enforcement[*]}{.resource}={.level}/{.method} {end}' 2>&1)
case $layout in
v2) want="cpu=kernel/cgroup_v2 memory=kernel/cgroup_v2 pids=kernel/cgroup_v2 " ;;
*) want="cpu=kernel/cgroup_v1 memory=kernel/cgroup_v1 pids=kernel/cgroup_v1 " ;;
esac
if [ "$levels" = "$want" ]; then
	ok "host levels: $levels"
else
	fail "host levels: $levels, want $want; reasons: $(ctl get host local -o jsonpath='{.status.enforcement[*].reason}' 2>&1)"
fi

# v2 limit files of group dir: cpu.max, memory.max, pids.max as wanted.
files() {
	dir=$1 cpu=$2 mem=$3 pids=$4 what=$5
	if [ "$layout" != v2 ]; then
		ok "$what: not a pure cgroup v2 host, its limits are in v1 files (not read here)"
		return
	fi
	got="$(cat "$dir/cpu.max" "$dir/memory.max" "$dir/pids.max" 2>&1 | tr '\n' ' ')"
	if [ "$got" = "$cpu $mem $pids " ]; then
		ok "$what: cpu.max $cpu, memory.max $mem, pids.max $pids"
	else
		fail "$what: read $got, want $cpu $mem $pids"
	fi
}
files "$mount$rel/marshal.slice/marshal-check.slice" "50000 100000" 268435456 64 "profile slice limits"

# A launch of the required workspace with kernel minimums is admitted;
# the agent reads its own scope's files before anything else runs.
out=$(ctl run -w web -- sh -c 'g=$(sed -n "s/^0:://p" /proc/self/cgroup); echo "$g"; cat "'"$mount"'$g/cpu.max" "'"$mount"'$g/memory.max" "'"$mount"'$g/pids.max"' 2>&1)
scope=$(echo "$out" | head -n 1)
case $scope in
"$rel"/marshal.slice/marshal-check.slice/marshal-check-*.scope) ok "required workspace with kernel minimums admitted, agent in $scope" ;;
*) fail "launch of the required workspace: $out" ;;
esac
if [ "$layout" = v2 ]; then
	got=$(echo "$out" | tail -n 3 | tr '\n' ' ')
	if [ "$got" = "25000 100000 67108864 16 " ]; then
		ok "scope limits, read by the agent: cpu.max 25000 100000, memory.max 67108864, pids.max 16"
	else
		fail "scope limits, read by the agent: $got, want 25000 100000 67108864 16"
	fi
fi

# An allocation over the request is OOM-killed in the scope.
ctl run -w web -- sh -c 'head -c 1073741824 /dev/zero | tail -n 1; exit 0' >/dev/null 2>&1
tries=0
until ctl events --for workspace/web 2>/dev/null | grep -q AgentOOMKilled; do
	tries=$((tries + 1))
	if [ "$tries" -gt 50 ]; then
		break
	fi
	sleep 0.2
done
if line=$(ctl events --for workspace/web 2>&1 | grep AgentOOMKilled); then
	ok "allocation over the request OOM-killed: $(echo "$line" | head -n 1 | tr -s ' ')"
else
	fail "no AgentOOMKilled event after allocating 1 GiB under 64 MiB"
fi

# A fork loop is stopped by the scope's pids.max: the shell's fork fails
# before the 100th child.
out=$(ctl run -w web -- sh -c 'i=0; while [ $i -lt 100 ]; do sleep 3 & i=$((i+1)); done; echo "forked $i"' 2>&1)
if echo "$out" | grep -qi "fork" && ! echo "$out" | grep -q "forked 100"; then
	ok "fork loop stopped by pids.max: $(echo "$out" | grep -i fork | head -n 1)"
else
	fail "fork loop: $out"
fi

exit $failed
