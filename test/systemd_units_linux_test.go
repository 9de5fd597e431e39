//go:build linux

package test

import (
	"bytes"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// unitKinds are the units in dist/systemd, by the directory they are in.
var unitKinds = []string{"system", "user"}

// coderYAML declares a profile without limits, so that no test here
// writes limits into the host's cgroup v1 hierarchies.
const coderYAML = `apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata:
  name: coder
`

func TestMakeInstall(t *testing.T) {
	root := srcRoot(t)
	tests := []struct {
		name    string
		vars    []string // besides DESTDIR and BIN
		bindir  string   // where ExecStart must point: no DESTDIR in it
		unitdir string   // the parent of system/ and user/
		// apparmor is where marshal-confine's AppArmor profile goes; ""
		// for none.
		apparmor string
	}{
		{name: "prefix_usr", vars: []string{"PREFIX=/usr"}, bindir: "/usr/bin", unitdir: "/usr/lib/systemd", apparmor: "/etc/apparmor.d"},
		{name: "default_prefix", bindir: "/usr/local/bin", unitdir: "/usr/local/lib/systemd", apparmor: "/etc/apparmor.d"},
		{name: "bindir_apart", vars: []string{"PREFIX=/opt/marshal", "BINDIR=/opt/marshal/sbin", "APPARMOR_DIR=/opt/marshal/apparmor"},
			bindir: "/opt/marshal/sbin", unitdir: "/opt/marshal/lib/systemd", apparmor: "/opt/marshal/apparmor"},
		{name: "no_apparmor", vars: []string{"APPARMOR_DIR="}, bindir: "/usr/local/bin", unitdir: "/usr/local/lib/systemd"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dest := t.TempDir()
			vars := append([]string{"DESTDIR=" + dest, "BIN=" + bin}, tc.vars...)
			mustMake(t, "install", vars...)

			want := map[string]fs.FileMode{
				tc.bindir + "/marshald":                 0o755,
				tc.bindir + "/marshalctl":               0o755,
				tc.bindir + "/marshal-confine":          0o755,
				tc.bindir + "/marshal-devguard-launch":  0o755,
				tc.unitdir + "/system/marshald.service": 0o644,
				tc.unitdir + "/user/marshald.service":   0o644,
			}
			if tc.apparmor != "" {
				want[tc.apparmor+"/marshal-confine"] = 0o644
			}
			got := filesBelow(t, dest)
			if !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
				t.Fatalf("installed files = %q, want %q", got, slices.Sorted(maps.Keys(want)))
			}
			for file, mode := range want {
				fi, err := os.Stat(dest + file)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != mode {
					t.Errorf("mode of %s = %v, want %v", file, fi.Mode().Perm(), mode)
				}
			}
			for _, name := range []string{"marshald", "marshalctl", "marshal-confine"} {
				if !bytes.Equal(readBytes(t, filepath.Join(bin, name)), readBytes(t, dest+tc.bindir+"/"+name)) {
					t.Errorf("%s/%s is not the built %s", tc.bindir, name, name)
				}
			}
			for _, kind := range unitKinds {
				src := string(readBytes(t, filepath.Join(root, "dist", "systemd", kind, "marshald.service")))
				if n := strings.Count(src, "@BINDIR@"); n != 1 {
					t.Fatalf("dist/systemd/%s/marshald.service has %d @BINDIR@ placeholders, want 1", kind, n)
				}
				unit := string(readBytes(t, dest+tc.unitdir+"/"+kind+"/marshald.service"))
				if unit != strings.ReplaceAll(src, "@BINDIR@", tc.bindir) {
					t.Errorf("the installed %s unit is not the dist one with @BINDIR@ = %s:\n%s", kind, tc.bindir, unit)
				}
				execStart := unitDirective(unit, "ExecStart")
				if len(execStart) != 1 {
					t.Fatalf("%s unit: ExecStart lines = %q, want one", kind, execStart)
				}
				if argv0 := strings.Fields(execStart[0])[0]; argv0 != tc.bindir+"/marshald" {
					t.Errorf("%s unit: ExecStart runs %s, want the installed %s/marshald", kind, argv0, tc.bindir)
				}
			}

			if tc.apparmor != "" {
				profile := string(readBytes(t, dest+tc.apparmor+"/marshal-confine"))
				if !strings.Contains(profile, "profile marshal-confine "+tc.bindir+"/marshal-confine ") || !strings.Contains(profile, "  userns,\n") {
					t.Errorf("the installed AppArmor profile does not allow %s/marshal-confine its user namespaces:\n%s", tc.bindir, profile)
				}
			}

			mustMake(t, "uninstall", vars...)
			if left := filesBelow(t, dest); len(left) != 0 {
				t.Errorf("uninstall left %q", left)
			}
		})
	}
}

func TestMakeInstallNeedsBuiltBinaries(t *testing.T) {
	dest := t.TempDir()
	out, err := runMake(t, "install", "DESTDIR="+dest, "BIN="+t.TempDir())
	if err == nil {
		t.Fatalf("make install without binaries succeeded:\n%s", out)
	}
	if !strings.Contains(out, "make build") {
		t.Errorf("make install without binaries does not say to build first:\n%s", out)
	}
	if left := filesBelow(t, dest); len(left) != 0 {
		t.Errorf("a failed install left %q", left)
	}
}

// TestUnitsVerify runs systemd's own checker on the installed units: every
// directive known to this systemd, its value valid, ExecStart executable.
func TestUnitsVerify(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("needs systemd-analyze")
	}
	// No DESTDIR: ExecStart must name a binary that exists. The AppArmor
	// profile goes below the prefix too, never into the host's /etc.
	prefix := t.TempDir()
	mustMake(t, "install", "PREFIX="+prefix, "BIN="+bin, "APPARMOR_DIR="+prefix+"/apparmor.d")
	for _, kind := range unitKinds {
		t.Run(kind+"_unit", func(t *testing.T) {
			args := []string{"verify", filepath.Join(prefix, "lib", "systemd", kind, "marshald.service")}
			if kind == "user" {
				args = append([]string{"--user"}, args...)
			}
			// A user-mode check reads the XDG directories: give it empty
			// ones, never the caller's.
			home := t.TempDir()
			cmd := exec.Command("systemd-analyze", args...)
			cmd.Env = append(os.Environ(),
				"SYSTEMD_LOG_LEVEL=info", "HOME="+home, "XDG_RUNTIME_DIR="+t.TempDir(),
				"XDG_CONFIG_HOME="+home+"/.config", "XDG_DATA_HOME="+home+"/.local/share",
				"XDG_STATE_HOME="+home+"/.local/state", "XDG_CACHE_HOME="+home+"/.cache")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("systemd-analyze %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			// It warns (exit 0) about unknown or ignored directives; a
			// line about another unit is the host's business.
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				switch {
				case strings.Contains(line, "marshald"):
					t.Errorf("systemd-analyze: %s", line)
				case line != "":
					t.Logf("systemd-analyze (not about marshald): %s", line)
				}
			}
		})
	}
}

// TestUnitOnUserManager installs a unit with make install, starts it on a
// throwaway systemd user manager and checks the service's whole life:
// start returns once marshald reported READY, the socket answers, an agent
// scope lives beside it, stop is clean and leaves the agent running, and a
// start finds the agent again.
//
// marshald runs as root here, so it is in system mode: the user unit gets
// every path as a flag, and the systemd backend reaches the throwaway
// manager through DBUS_SYSTEM_BUS_ADDRESS. The system unit runs with its
// own directory settings, which a user manager maps into its XDG
// directories, and with every hardening directive but PrivateTmp= (each
// path of the test is below /tmp).
func TestUnitOnUserManager(t *testing.T) {
	tests := []struct {
		name     string
		unit     string // "user" or "system"
		backend  string
		delegate string // the unit's Delegate= as systemctl shows it
	}{
		{name: "user_unit_systemd_backend", unit: "user", backend: "systemd", delegate: "no"},
		{name: "user_unit_cgroupfs_backend", unit: "user", backend: "cgroupfs", delegate: "no"},
		{name: "system_unit_systemd_backend", unit: "system", backend: "systemd", delegate: "yes"},
		// The cgroupfs tree inside the unit's own delegated group: the
		// layout where KillMode=process is what keeps agents alive.
		{name: "system_unit_cgroupfs_in_own_group", unit: "system", backend: "cgroupfs", delegate: "yes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mounts, err := cgroup.ReadMounts()
			if err != nil {
				t.Fatal(err)
			}
			var d *daemon
			if tc.unit == "user" {
				d = newDaemon(t) // a private cgroup tree and temp dirs
			}
			m := userManager(t)
			env := managerEnv(t, m)
			if tc.unit == "system" {
				// Where ConfigurationDirectory= and RuntimeDirectory= put
				// them in user mode.
				d = &daemon{
					t:      t,
					config: filepath.Join(env["XDG_CONFIG_HOME"], "marshal", "manifests.d"),
					socket: filepath.Join(env["XDG_RUNTIME_DIR"], "marshal", "marshal.sock"),
					root:   m.Cgroup + "/app.slice/marshald.service",
				}
				provideInaccessibleNodes(t, m)
			}

			unitDir := filepath.Join(m.RuntimeDir, "systemd", "user")
			if paths := strings.Fields(unitProps(t, m, "", "UnitPath")["UnitPath"]); !slices.Contains(paths, unitDir) {
				t.Fatalf("the manager does not load units from %s; it reads %q", unitDir, paths)
			}
			prefix := t.TempDir()
			mustMake(t, "install", "PREFIX="+prefix, "BIN="+bin, "APPARMOR_DIR="+prefix+"/apparmor.d")
			copyUnit(t, filepath.Join(prefix, "lib", "systemd", tc.unit, "marshald.service"), filepath.Join(unitDir, "marshald.service"), 0o644)

			logPath := filepath.Join(t.TempDir(), "marshald.log")
			dropIn := []string{"[Service]", "StandardOutput=append:" + logPath, "StandardError=append:" + logPath,
				// A race-enabled marshald would linger a second at exit.
				"Environment=GORACE=atexit_sleep_ms=0"}
			var opts []string
			if tc.unit == "user" {
				opts = append(opts, "--config-dir="+d.config, "--state-dir="+d.state, "--socket="+d.socket)
			} else {
				dropIn = append(dropIn, "PrivateTmp=no")
			}
			switch tc.backend {
			case "systemd":
				dropIn = append(dropIn, "Environment=DBUS_SYSTEM_BUS_ADDRESS=unix:path=%t/bus")
			case "cgroupfs":
				opts = append(opts, "--backend=cgroupfs", "--cgroup-root="+d.root)
			}
			dropIn = append(dropIn, `Environment="MARSHALD_OPTS=`+strings.Join(opts, " ")+`"`)
			writeText(t, filepath.Join(unitDir, "marshald.service.d", "test.conf"), strings.Join(dropIn, "\n")+"\n")
			d.write("coder.yaml", coderYAML)

			t.Cleanup(func() {
				if t.Failed() {
					status, _ := systemctl(m, "status", "marshald.service")
					t.Logf("systemctl --user status marshald:\n%s\nmarshald log:\n%s", status, fileOrEmpty(t, logPath))
				}
			})

			// Type=notify: start returns only once marshald sent READY=1,
			// which it logs just before.
			mustSystemctl(t, m, "start", "marshald.service")
			if !strings.Contains(fileOrEmpty(t, logPath), "msg=ready") {
				t.Errorf("systemctl start returned before marshald logged ready:\n%s", fileOrEmpty(t, logPath))
			}
			props := unitProps(t, m, "marshald.service", "ActiveState", "SubState", "StatusText", "Type", "NotifyAccess",
				"WatchdogUSec", "Restart", "KillMode", "Delegate", "ControlGroup", "MainPID")
			wantProps := map[string]string{
				"ActiveState": "active", "SubState": "running", "Type": "notify", "NotifyAccess": "main",
				"WatchdogUSec": "30s", "Restart": "on-failure", "KillMode": "process", "Delegate": tc.delegate,
				// Sent with READY=1, after the config dir's first load.
				"StatusText": "1 objects from " + d.config,
			}
			if tc.unit == "system" {
				wantProps["ControlGroup"] = d.root
			}
			checkProps(t, "after start", props, wantProps)
			checkSandbox(t, props["MainPID"], tc.unit)
			start := logRecord(fileOrEmpty(t, logPath), "starting")
			for k, want := range map[string]string{"config": d.config, "socket": d.socket, "backend": tc.backend} {
				if start[k] != want {
					t.Errorf("marshald started with %s=%q, want %q", k, start[k], want)
				}
			}
			if _, err := os.Stat(filepath.Join(start["state"], "state.db")); err != nil {
				t.Errorf("no state database in the state dir: %v", err)
			}

			if out := d.mustCtl("get", "hosts"); !strings.Contains(out, "local") {
				t.Errorf("get hosts:\n%s", out)
			}
			// The sandbox leaves what the backend needs: the probe works.
			hosts, profiles, agents := d.watch("hosts"), d.watch("profiles"), d.watch("agents")
			hosts.until(t, "local", "ready", func(o map[string]any) bool { return conditionIs(o, "Ready", "True") })
			profiles.until(t, "coder", "ready", func(o map[string]any) bool { return conditionIs(o, "Ready", "True") })

			name := scope.ScopeName("coder", scope.NewID())
			agent := startFakeAgent(t, m, mounts, d, tc.backend, name)
			populated := func(o map[string]any) bool { return field(o, "status", "populated") == true }
			agents.until(t, name, "seen", populated)

			// The watches end here rather than by marshald going away.
			for _, w := range []*watch{hosts, profiles, agents} {
				w.cancel()
			}
			mustSystemctl(t, m, "stop", "marshald.service")
			checkProps(t, "after stop", unitProps(t, m, "marshald.service", "ActiveState", "SubState", "Result", "ExecMainStatus"),
				map[string]string{"ActiveState": "inactive", "SubState": "dead", "Result": "success", "ExecMainStatus": "0"})
			if !strings.Contains(fileOrEmpty(t, logPath), "agents keep running") {
				t.Errorf("marshald did not log a clean stop:\n%s", fileOrEmpty(t, logPath))
			}
			if _, err := os.Lstat(d.socket); err == nil {
				t.Errorf("the socket %s outlived marshald", d.socket)
			}
			agent.checkAlive(t, "after marshald stopped")
			if got := cgroup2Path(t, agent.pid); path.Base(got) != name {
				t.Errorf("after the stop the agent is in %s, want its scope %s", got, name)
			}
			if tc.backend == "systemd" {
				checkProps(t, "the agent's scope after the stop", unitProps(t, m, name, "ActiveState"), map[string]string{"ActiveState": "active"})
			}

			mustSystemctl(t, m, "start", "marshald.service")
			agents = d.watch("agents")
			agents.until(t, name, "seen again after a restart", populated)
			agents.cancel()
			mustSystemctl(t, m, "stop", "marshald.service")
			agent.checkAlive(t, "after the second stop")
		})
	}
}

// checkSandbox checks that the unit's hardening holds for marshald, pid:
// no new privileges and a seccomp filter for both units, and for the
// system unit the capability bounding set and a read-only root.
func checkSandbox(t *testing.T, pid, unit string) {
	t.Helper()
	status := map[string]string{}
	for _, line := range strings.Split(string(readBytes(t, "/proc/"+pid+"/status")), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			status[k] = strings.TrimSpace(v)
		}
	}
	want := map[string]string{"NoNewPrivs": "1", "Seccomp": "2"}
	if unit == "system" {
		want["CapBnd"] = fmt.Sprintf("%016x", 1<<unix.CAP_CHOWN|1<<unix.CAP_DAC_OVERRIDE|1<<unix.CAP_KILL)
	}
	checkProps(t, "marshald's /proc status", status, want)
	if unit != "system" {
		return
	}
	for _, line := range strings.Split(string(readBytes(t, "/proc/"+pid+"/mountinfo")), "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" {
			if !slices.Contains(strings.Split(f[5], ","), "ro") {
				t.Errorf("marshald's root is mounted %s, want read-only (ProtectSystem=strict)", f[5])
			}
			return
		}
	}
	t.Errorf("no root mount in marshald's mountinfo")
}

// startFakeAgent starts a process in a scope named name as a launch leaves it:
// with the systemd backend a transient scope of the manager in the
// profile's slice, with cgroupfs a group in the profile's slice of the
// tree. The process is killed when t ends.
func startFakeAgent(t *testing.T, m *testutil.UserManager, mounts cgroup.Mounts, d *daemon, backend, name string) *runningProcess {
	t.Helper()
	var cmd *exec.Cmd
	if backend == "systemd" {
		cmd = exec.Command("systemd-run", "--user", "--quiet", "--scope", "--unit="+name, "--slice="+scope.SliceName("coder"), "--", "sleep", "1000")
		cmd.Env = append(os.Environ(), m.Env()...)
	} else {
		cmd = exec.Command("sleep", "1000")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := waitInBackground(cmd)
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
	})
	if backend == "cgroupfs" {
		dir := filepath.Join(mounts.V2, d.root, scope.RootSlice, scope.SliceName("coder"), name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeText(t, filepath.Join(dir, "cgroup.procs"), fmt.Sprint(cmd.Process.Pid))
	}
	select {
	case <-p.exited: // stderr is complete once Wait returned
		t.Fatalf("the agent exited at once: %v\n%s", p.err, stderr.String())
	default:
	}
	return p
}

// runningProcess is a started command whose Wait runs in the background.
type runningProcess struct {
	pid    int
	exited chan struct{} // closed when Wait returned
	err    error         // what Wait returned; read after exited
}

func waitInBackground(cmd *exec.Cmd) *runningProcess {
	p := &runningProcess{pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p
}

// checkAlive fails t when the process has exited, reaped or not.
func (p *runningProcess) checkAlive(t *testing.T, when string) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("process %d exited (%v) %s", p.pid, p.err, when)
	default:
	}
	// Killed but not yet reaped, it is a zombie.
	stat := string(readBytes(t, fmt.Sprintf("/proc/%d/stat", p.pid)))
	if i := strings.LastIndexByte(stat, ')'); i < 0 || strings.HasPrefix(stat[i+1:], " Z") {
		t.Fatalf("process %d is dead %s: %s", p.pid, when, stat)
	}
}

// TestSdNotify runs marshald with the environment systemd gives a
// Type=notify service with a watchdog, and checks its side of the
// protocol on a notify socket of the test's own: READY=1 (with the loaded
// object count) once the config dir is declared, WATCHDOG=1 again and
// again, STOPPING=1 on SIGTERM and a clean exit, each from marshald's own
// pid (what NotifyAccess=main accepts). Under the journal (JOURNAL_STREAM
// set) its log lines carry no timestamp, which the journal adds.
func TestSdNotify(t *testing.T) {
	tests := []struct {
		name    string
		journal bool
	}{
		{name: "under_the_journal", journal: true},
		{name: "without_the_journal", journal: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDaemon(t)
			d.write("coder.yaml", coderYAML)
			notifyPath := filepath.Join(t.TempDir(), "notify")
			notify := listenNotify(t, notifyPath)
			logFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
			if err != nil {
				t.Fatal(err)
			}
			defer logFile.Close()

			// WATCHDOG_PID must be marshald's pid: the shell exports its
			// own, then becomes marshald.
			cmd := exec.Command("/bin/sh", "-c", `export WATCHDOG_PID=$$; exec "$0" "$@"`,
				filepath.Join(bin, "marshald"),
				"--config-dir", d.config, "--state-dir", d.state, "--socket", d.socket,
				"--backend", "cgroupfs", "--cgroup-root", d.root)
			cmd.Env = append(withoutEnv("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM", "GORACE"),
				"NOTIFY_SOCKET="+notifyPath, "WATCHDOG_USEC=200000",
				// A race-enabled marshald would linger a second at exit.
				"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
			if tc.journal {
				// As systemd sets it: the device and inode of stderr.
				fi, err := logFile.Stat()
				if err != nil {
					t.Fatal(err)
				}
				st := fi.Sys().(*syscall.Stat_t)
				cmd.Env = append(cmd.Env, fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino))
			}
			cmd.Stdout, cmd.Stderr = logFile, logFile
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			p := waitInBackground(cmd)
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-p.exited
				if t.Failed() {
					t.Logf("marshald log:\n%s", fileOrEmpty(t, logFile.Name()))
				}
			})
			pid := int32(cmd.Process.Pid)

			ready := notify.next(t, "the first notification")
			if ready.vars["READY"] != "1" {
				t.Fatalf("the first notification is %q, want READY=1", ready.raw)
			}
			if want := "1 objects from " + d.config; ready.vars["STATUS"] != want {
				t.Errorf("STATUS with READY=1 = %q, want %q", ready.vars["STATUS"], want)
			}
			// Ready means the manifests are declared and the socket serves.
			d.mustCtl("get", "profiles", "coder")

			for i := range 3 {
				n := notify.next(t, fmt.Sprintf("watchdog ping %d", i+1))
				if n.vars["WATCHDOG"] != "1" {
					t.Fatalf("notification %q, want WATCHDOG=1", n.raw)
				}
			}

			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			var all []notification
			for {
				n := notify.next(t, "STOPPING=1")
				all = append(all, n)
				if n.vars["STOPPING"] == "1" {
					break
				}
			}
			select {
			case <-p.exited:
				if p.err != nil {
					t.Errorf("marshald exited with %v after SIGTERM, want status 0", p.err)
				}
			case <-time.After(testutil.Deadline):
				t.Fatal("marshald did not exit after SIGTERM")
			}
			for _, n := range append([]notification{ready}, all...) {
				if n.pid != pid {
					t.Errorf("%q came from pid %d, not marshald's %d: NotifyAccess=main drops it", n.raw, n.pid, pid)
				}
			}

			checkLogTimestamps(t, fileOrEmpty(t, logFile.Name()), !tc.journal)
		})
	}
}

// checkLogTimestamps checks that every log record of log starts with a
// time= attribute when want, and none does otherwise.
func checkLogTimestamps(t *testing.T, log string, want bool) {
	t.Helper()
	records := 0
	for _, line := range strings.Split(log, "\n") {
		stamped := strings.HasPrefix(line, "time=")
		if !stamped && !strings.HasPrefix(line, "level=") {
			continue
		}
		records++
		if stamped != want {
			t.Errorf("log line %q: timestamp %v, want %v", line, stamped, want)
		}
	}
	if records == 0 || !strings.Contains(log, "msg=ready") {
		t.Errorf("no log records, or no ready record:\n%s", log)
	}
}

// notification is one datagram on the notify socket.
type notification struct {
	raw  string
	vars map[string]string
	pid  int32 // the sender's, from SCM_CREDENTIALS
}

// notifySocket is a notify socket as systemd listens on it.
type notifySocket struct {
	msgs chan notification
}

// listenNotify listens on a unixgram socket at path, as systemd does on
// NOTIFY_SOCKET, with SO_PASSCRED so each datagram says who sent it. Its
// reader stops when t ends.
func listenNotify(t *testing.T, path string) *notifySocket {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var sockErr error
	if err := raw.Control(func(fd uintptr) {
		sockErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1)
	}); err != nil || sockErr != nil {
		t.Fatalf("SO_PASSCRED: %v %v", err, sockErr)
	}
	n := &notifySocket{msgs: make(chan notification)}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		buf := make([]byte, 4096)
		oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
		for {
			nb, noob, _, _, err := conn.ReadMsgUnix(buf, oob)
			if err != nil {
				return
			}
			msg := notification{raw: string(buf[:nb]), vars: map[string]string{}, pid: -1}
			for _, line := range strings.Split(msg.raw, "\n") {
				if k, v, ok := strings.Cut(line, "="); ok {
					msg.vars[k] = v
				}
			}
			if cmsgs, err := unix.ParseSocketControlMessage(oob[:noob]); err == nil {
				for _, c := range cmsgs {
					if cred, err := unix.ParseUnixCredentials(&c); err == nil {
						msg.pid = cred.Pid
					}
				}
			}
			select {
			case n.msgs <- msg:
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		conn.Close()
		<-stopped
	})
	return n
}

// next returns the next notification, failing t after testutil.Deadline.
func (n *notifySocket) next(t *testing.T, what string) notification {
	t.Helper()
	timer := time.NewTimer(testutil.Deadline)
	defer timer.Stop()
	select {
	case msg := <-n.msgs:
		return msg
	case <-timer.C:
		t.Fatalf("no notification after %v waiting for %s", testutil.Deadline, what)
		return notification{}
	}
}
