package cgrouptest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/cgroup"
)

// Layout is how a host mounts its cgroup hierarchies.
type Layout string

// The layouts a Kernel models.
const (
	// LayoutV2 is a pure cgroup v2 host (Debian 12, Ubuntu 22.04 and
	// later, Fedora, RHEL 9): one cgroup2 mount whose root has cpuset, cpu,
	// io, memory, hugetlb and pids, all enabled in its
	// cgroup.subtree_control.
	LayoutV2 Layout = "v2"
	// LayoutHybrid is the test machines' layout: cpu (with cpuacct),
	// memory and pids in cgroup v1 hierarchies, and a cgroup2 mount at
	// unified whose root has only hugetlb.
	LayoutHybrid Layout = "hybrid"
	// LayoutV1 has cgroup v1 hierarchies only, no cgroup2 mount.
	LayoutV1 Layout = "v1"
)

// Layouts lists every Layout.
var Layouts = []Layout{LayoutV2, LayoutHybrid, LayoutV1}

// v2RootControllers is what a pure v2 root offers, in the kernel's order.
var v2RootControllers = []string{"cpuset", "cpu", "io", "memory", "hugetlb", "pids"}

// Kernel is a model of the kernel's cgroup hierarchies over a temporary
// directory, behind cgroup.FS: what cgroupfs runs on in tests, so that
// one test covers each layout whatever the machine's is. Groups are
// directories and interface files are regular files holding what the
// kernel would show; Mkdir, Rmdir and WriteFile apply the kernel's rules:
//
//   - cgroup v2: a group's cgroup.controllers is its parent's
//     cgroup.subtree_control; a controller's interface files (cpu.max,
//     memory.max, pids.max and their kin) exist only in groups whose
//     parent enables it; enabling a controller the group lacks fails
//     ENOENT, and enabling one in a group (not the root) that holds
//     processes fails EBUSY, as does moving a process into a group (not
//     the root) that enables any, and disabling one a child enables.
//   - cgroup v1: each hierarchy's groups have its controllers' files.
//   - limits: cpu.max and cpu.cfs_quota_us refuse a quota below 1 ms
//     (EINVAL); memory limits are rounded down to a page.
//   - processes: writing a pid to cgroup.procs moves the (real, live)
//     process, ESRCH when there is none; a group with a process in it or
//     below is populated in cgroup.events until the process exits, which
//     the Kernel learns from a pidfd. cgroup.kill sends SIGKILL to the
//     processes of the subtree; rmdir of a group with a process or a
//     child group fails EBUSY.
//
// It does not enforce limits, make a process's children members, freeze
// (cgroup.freeze only shows in cgroup.events), or account usage beyond
// pids.current.
type Kernel struct {
	t      testing.TB
	mounts cgroup.Mounts
	// staging is where a group is made before it appears, whole, in its
	// hierarchy, and where a removed one goes before it is deleted: the
	// kernel makes and removes a group with its files at once, which an
	// inotify watcher relies on.
	staging string
	// hierarchies maps each mount to the controllers it carries; a
	// cgroup2 mount maps to nil.
	hierarchies map[string][]string

	mu      sync.Mutex
	members map[int]*kernelMember
	closed  bool
	ioErr   error
	waiters sync.WaitGroup
}

var _ cgroup.FS = (*Kernel)(nil)

// kernelMember is a live process the Kernel placed, and its group in each
// hierarchy.
type kernelMember struct {
	*member
	groups map[string]string // by mount
}

// NewKernel returns a Kernel of layout l in a temporary directory of t.
// When t ends it stops watching its processes (it never kills them) and
// reports any error it met keeping its files.
func NewKernel(t testing.TB, l Layout) *Kernel {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "cgroup")
	k := &Kernel{t: t, staging: filepath.Join(base, "staging"), hierarchies: map[string][]string{}, members: map[int]*kernelMember{}}
	if err := os.Mkdir(k.staging, 0o755); err != nil {
		t.Fatal(err)
	}
	k.mu.Lock() // write is called with it held
	defer k.mu.Unlock()
	v1 := map[string][]string{"cpu,cpuacct": {"cpu", "cpuacct"}, "memory": {"memory"}, "pids": {"pids"}}
	switch l {
	case LayoutV2:
		k.mounts.V2 = dir
	case LayoutHybrid:
		k.mounts.V2 = filepath.Join(dir, "unified")
	case LayoutV1:
	default:
		t.Fatalf("cgrouptest: unknown layout %q", l)
	}
	if l != LayoutV2 {
		k.mounts.V1 = map[string]string{}
		for name, ctrls := range v1 {
			mnt := filepath.Join(dir, name)
			k.hierarchies[mnt] = ctrls
			for _, c := range ctrls {
				k.mounts.V1[c] = mnt
			}
			k.mkroot(mnt, map[string]string{cgroup.FileProcs: ""})
			k.addFiles(mnt, ctrls, false)
		}
	}
	if k.mounts.V2 != "" {
		k.hierarchies[k.mounts.V2] = nil
		ctrls := []string{"hugetlb"}
		if l == LayoutV2 {
			ctrls = v2RootControllers
		}
		k.mkroot(k.mounts.V2, map[string]string{
			cgroup.FileControllers:    strings.Join(ctrls, " "),
			cgroup.FileSubtreeControl: strings.Join(ctrls, " "),
			cgroup.FileProcs:          "",
			cgroup.FileCPUStat:        "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
		})
		if l == LayoutHybrid {
			// The unified hierarchy of a hybrid host enables nothing.
			k.write(k.mounts.V2, cgroup.FileSubtreeControl, "")
		}
	}
	t.Cleanup(k.close)
	return k
}

// Mounts is where the modelled hierarchies are mounted.
func (k *Kernel) Mounts() cgroup.Mounts { return k.mounts }

// close stops the exit waiters and reports what went wrong on disk.
func (k *Kernel) close() {
	k.mu.Lock()
	k.closed = true
	for _, m := range k.members {
		m.pidfd.Close() // ends its waiter's read
	}
	err := k.ioErr
	k.mu.Unlock()
	k.waiters.Wait()
	if err != nil {
		k.t.Errorf("cgrouptest: keeping the kernel model's files: %v", err)
	}
}

func (k *Kernel) mkroot(dir string, files map[string]string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		k.t.Fatal(err)
	}
	for name, content := range files {
		k.write(dir, name, content)
	}
}

// write stores content as interface file name of dir, noting a failure.
// Readers do not take the Kernel's lock, and a file rewritten in place
// would show them nothing between truncating and writing, which the
// kernel never does: the content is written aside and renamed over it.
func (k *Kernel) write(dir, name, content string) {
	tmp := filepath.Join(k.staging, ".write")
	err := os.WriteFile(tmp, []byte(content), 0o644)
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	k.ioErr = errors.Join(k.ioErr, err)
}

// mountOf returns the mount of the hierarchy dir is in, "" when none.
func (k *Kernel) mountOf(dir string) string {
	for mnt := range k.hierarchies {
		if dir == mnt || strings.HasPrefix(dir, mnt+"/") {
			return mnt
		}
	}
	return ""
}

func pathErr(op, path string, errno syscall.Errno) error {
	return &fs.PathError{Op: op, Path: path, Err: errno}
}

// Mkdir creates group dir with the interface files the kernel would show
// in it.
func (k *Kernel) Mkdir(dir string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	mnt := k.mountOf(dir)
	if mnt == "" {
		return pathErr("mkdir", dir, syscall.EPERM)
	}
	if _, err := os.Stat(dir); err == nil {
		return pathErr("mkdir", dir, syscall.EEXIST)
	} else if _, err := os.Stat(filepath.Dir(dir)); err != nil {
		return err
	}
	final := dir
	dir = filepath.Join(k.staging, filepath.Base(final))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	files := map[string]string{cgroup.FileProcs: ""}
	var ctrls []string
	if v2 := k.hierarchies[mnt] == nil; v2 {
		ctrls = strings.Fields(k.read(filepath.Dir(final), cgroup.FileSubtreeControl))
		files[cgroup.FileControllers] = strings.Join(ctrls, " ")
		files[cgroup.FileSubtreeControl] = ""
		files[cgroup.FileThreads] = ""
		files[cgroup.FileEvents] = eventsContent(false)
		files[cgroup.FileKill] = ""
		files[cgroup.FileFreeze] = "0"
		files[cgroup.FileCPUStat] = "usage_usec 0\nuser_usec 0\nsystem_usec 0\n"
	} else {
		ctrls = k.hierarchies[mnt]
	}
	for name, content := range files {
		k.write(dir, name, content)
	}
	k.addFiles(dir, ctrls, k.hierarchies[mnt] == nil)
	return os.Rename(dir, final)
}

// controllerFiles are the interface files of each controller and what a
// new group holds in them, in cgroup v2 and in cgroup v1.
var controllerFiles = map[bool]map[string]map[string]string{
	true: {
		"cpu":    {cgroup.FileCPUMax: "max 100000", "cpu.weight": "100"},
		"memory": {cgroup.FileMemoryMax: "max", cgroup.FileMemoryCurrent: "0", cgroup.FileMemoryEvents: "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"},
		"pids":   {cgroup.FilePIDsMax: "max", cgroup.FilePIDsCurrent: "0"},
	},
	false: {
		"cpu":     {cgroup.FileCFSQuota: "-1", cgroup.FileCFSPeriod: "100000"},
		"cpuacct": {cgroup.FileCPUAcctUsage: "0"},
		"memory": {cgroup.FileMemoryLimit: strconv.FormatInt(v1MemoryUnlimited(), 10), cgroup.FileMemoryUsage: "0",
			cgroup.FileMemoryFailcnt: "0", cgroup.FileMemoryOOMCtl: "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"},
		"pids": {cgroup.FilePIDsMax: "max", cgroup.FilePIDsCurrent: "0"},
	},
}

// v1MemoryUnlimited is what memory.limit_in_bytes shows without a limit.
func v1MemoryUnlimited() int64 {
	return int64(^uint64(0)>>1) &^ int64(os.Getpagesize()-1)
}

func (k *Kernel) addFiles(dir string, ctrls []string, v2 bool) {
	for _, c := range ctrls {
		for name, content := range controllerFiles[v2][c] {
			k.write(dir, name, content)
		}
	}
}

func (k *Kernel) removeFiles(dir string, ctrls []string) {
	for _, c := range ctrls {
		for name := range controllerFiles[true][c] {
			k.ioErr = errors.Join(k.ioErr, os.Remove(filepath.Join(dir, name)))
		}
	}
}

// read returns interface file name of dir, "" when missing.
func (k *Kernel) read(dir, name string) string {
	b, _ := os.ReadFile(filepath.Join(dir, name))
	return strings.TrimSpace(string(b))
}

// children returns the groups directly below dir.
func children(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// holdsProcesses reports whether a process is directly in group dir.
func (k *Kernel) holdsProcesses(mnt, dir string) bool {
	for _, m := range k.members {
		if m.groups[mnt] == dir {
			return true
		}
	}
	return false
}

// Rmdir removes group dir unless it has a process or a child group in it
// (EBUSY), as rmdir(2) on a cgroup mount.
func (k *Kernel) Rmdir(dir string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	mnt := k.mountOf(dir)
	if mnt == "" || dir == mnt {
		return pathErr("rmdir", dir, syscall.EBUSY)
	}
	if _, err := os.Stat(dir); err != nil {
		return err
	}
	if len(children(dir)) > 0 || k.holdsProcesses(mnt, dir) {
		return pathErr("rmdir", dir, syscall.EBUSY)
	}
	gone := filepath.Join(k.staging, filepath.Base(dir))
	if err := os.Rename(dir, gone); err != nil {
		return err
	}
	return os.RemoveAll(gone)
}

// WriteFile writes value to interface file name of group dir, with the
// kernel's checks and effects for the files it models.
func (k *Kernel) WriteFile(dir, name, value string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	p := filepath.Join(dir, name)
	mnt := k.mountOf(dir)
	if st, err := os.Stat(p); err != nil || mnt == "" || st.IsDir() {
		return fmt.Errorf("writing %q: %w: %w", value, cgroup.ErrNotFound, pathErr("open", p, syscall.ENOENT))
	}
	v2 := k.hierarchies[mnt] == nil
	var err error
	switch name {
	case cgroup.FileSubtreeControl:
		err = k.writeSubtreeControl(mnt, dir, value)
	case cgroup.FileProcs:
		err = k.writeProcs(mnt, dir, v2, value)
	case cgroup.FileKill:
		err = k.kill(dir, value)
	case cgroup.FileFreeze:
		k.write(dir, name, value)
		k.writeEvents(dir)
	default:
		var content string
		if content, err = limitContent(k.read(dir, name), name, value); err == nil {
			k.write(dir, name, content)
		}
	}
	if err != nil {
		return fmt.Errorf("writing %q: %w", value, &fs.PathError{Op: "write", Path: p, Err: err})
	}
	return nil
}

// writeSubtreeControl applies "+c -d …" to cgroup.subtree_control of
// dir and gives each child group its new controllers and their files.
func (k *Kernel) writeSubtreeControl(mnt, dir, value string) error {
	have := strings.Fields(k.read(dir, cgroup.FileControllers))
	enabled := strings.Fields(k.read(dir, cgroup.FileSubtreeControl))
	var add, drop []string
	for _, tok := range strings.Fields(value) {
		c := tok[1:]
		switch {
		case tok[0] == '+' && !slices.Contains(have, c):
			return syscall.ENOENT
		case tok[0] == '+' && dir != mnt && k.holdsProcesses(mnt, dir):
			return syscall.EBUSY // the no-internal-process rule
		case tok[0] == '+':
			if !slices.Contains(enabled, c) {
				add = append(add, c)
			}
		case tok[0] == '-':
			for _, child := range children(dir) {
				if slices.Contains(strings.Fields(k.read(child, cgroup.FileSubtreeControl)), c) {
					return syscall.EBUSY
				}
			}
			if slices.Contains(enabled, c) {
				drop = append(drop, c)
			}
		default:
			return syscall.EINVAL
		}
	}
	var now []string
	for _, c := range v2RootControllers { // the kernel lists them in its order
		if (slices.Contains(enabled, c) || slices.Contains(add, c)) && !slices.Contains(drop, c) {
			now = append(now, c)
		}
	}
	// Readers do not take the Kernel's lock: the children get their
	// controllers before the parent shows them enabled, so that no reader
	// sees a controller enabled that a child lacks.
	for _, child := range children(dir) {
		k.write(child, cgroup.FileControllers, strings.Join(now, " "))
		k.addFiles(child, add, true)
		k.removeFiles(child, drop)
	}
	k.write(dir, cgroup.FileSubtreeControl, strings.Join(now, " "))
	return nil
}

// writeProcs moves the process written into group dir of hierarchy mnt.
func (k *Kernel) writeProcs(mnt, dir string, v2 bool, value string) error {
	pid, err := strconv.Atoi(strings.TrimSpace(value))
	if err != nil || pid <= 0 {
		return syscall.EINVAL
	}
	if v2 && dir != mnt && k.read(dir, cgroup.FileSubtreeControl) != "" {
		return syscall.EBUSY // the no-internal-process rule
	}
	m := k.members[pid]
	if m != nil && m.exited() {
		k.dropLocked(m)
		m = nil
	}
	if m == nil {
		pm, err := openMember(pid)
		if errors.Is(err, cgroup.ErrNoProcess) {
			return syscall.ESRCH
		}
		if err != nil {
			return err
		}
		m = &kernelMember{member: pm, groups: map[string]string{}}
		k.members[pid] = m
		k.waiters.Add(1)
		go k.wait(m)
	}
	from := m.groups[mnt]
	m.groups[mnt] = dir
	k.membershipChanged(mnt, from, dir)
	return nil
}

// membershipChanged rewrites what a move between groups from and to of
// hierarchy mnt changed: their cgroup.procs, and the cgroup.events and
// pids.current of every group above either.
func (k *Kernel) membershipChanged(mnt string, groups ...string) {
	seen := map[string]bool{}
	for _, g := range groups {
		if g == "" {
			continue
		}
		var pids []string
		for _, m := range k.members {
			if m.groups[mnt] == g {
				pids = append(pids, strconv.Itoa(m.pid))
			}
		}
		slices.Sort(pids)
		k.write(g, cgroup.FileProcs, strings.Join(pids, "\n"))
		for d := g; !seen[d] && (d == mnt || strings.HasPrefix(d, mnt+"/")); d = filepath.Dir(d) {
			seen[d] = true
			if d != mnt {
				k.writeEvents(d)
			}
			if _, err := os.Stat(filepath.Join(d, cgroup.FilePIDsCurrent)); err == nil {
				k.write(d, cgroup.FilePIDsCurrent, strconv.Itoa(len(k.below(d))))
			}
		}
	}
}

// below returns the members in group dir or below it.
func (k *Kernel) below(dir string) []*kernelMember {
	var out []*kernelMember
	for _, m := range k.members {
		for _, g := range m.groups {
			if g == dir || strings.HasPrefix(g, dir+"/") {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

// writeEvents rewrites cgroup.events of v2 group dir in place, so that a
// reader never sees it empty and an inotify watch sees IN_MODIFY.
func (k *Kernel) writeEvents(dir string) {
	populated := len(k.below(dir)) > 0
	frozen := k.read(dir, cgroup.FileFreeze) == "1"
	content := fmt.Sprintf("populated %d\nfrozen %d\n", b2i(populated), b2i(frozen))
	file, err := os.OpenFile(filepath.Join(dir, cgroup.FileEvents), os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return // removed meanwhile
	}
	if err == nil {
		_, err = file.WriteAt([]byte(content), 0)
		err = errors.Join(err, file.Close())
	}
	k.ioErr = errors.Join(k.ioErr, err)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// kill sends SIGKILL to every process in v2 group dir or below.
func (k *Kernel) kill(dir, value string) error {
	if value != "1" {
		return syscall.EINVAL
	}
	for _, m := range k.below(dir) {
		if err := m.signal(unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			return err
		}
	}
	return nil
}

// wait waits for member m to exit, then takes it out of its groups.
func (k *Kernel) wait(m *kernelMember) {
	defer k.waiters.Done()
	err := m.waitExit()
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case k.closed || k.members[m.pid] != m:
	case err != nil:
		k.ioErr = errors.Join(k.ioErr, fmt.Errorf("waiting for pid %d to exit: %w", m.pid, err))
	default:
		k.dropLocked(m)
	}
}

// dropLocked takes member m, exited, out of its groups.
func (k *Kernel) dropLocked(m *kernelMember) {
	if k.members[m.pid] != m {
		return
	}
	delete(k.members, m.pid)
	for mnt, g := range m.groups {
		k.membershipChanged(mnt, g)
	}
	m.pidfd.Close()
}

// limitContent checks value written to limit file name, holding cur, as
// the kernel does and returns what the file shows after.
func limitContent(cur, name, value string) (string, error) {
	value = strings.TrimSpace(value)
	page := int64(os.Getpagesize())
	switch name {
	case cgroup.FileCPUMax:
		f := strings.Fields(value)
		old, err := cgroup.ParseCPUMax(cur)
		if err != nil || len(f) == 0 || len(f) > 2 {
			return "", syscall.EINVAL
		}
		if len(f) == 2 {
			p, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || p < 1000 || p > 1000000 {
				return "", syscall.EINVAL
			}
			old.Period = p
		}
		old.Quota = 0
		if f[0] != "max" {
			q, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || q < 1000 {
				return "", syscall.EINVAL
			}
			old.Quota = q
		}
		return old.String(), nil
	case cgroup.FileMemoryMax, cgroup.FilePIDsMax:
		v, err := cgroup.ParseMax(value)
		if err != nil {
			return "", syscall.EINVAL
		}
		if name == cgroup.FileMemoryMax {
			v &^= page - 1
		}
		return cgroup.FormatMax(v), nil
	case cgroup.FileCFSQuota, cgroup.FileCFSPeriod, cgroup.FileMemoryLimit:
		v, err := strconv.ParseInt(value, 10, 64)
		switch {
		case err != nil:
			return "", syscall.EINVAL
		case name == cgroup.FileMemoryLimit && v < 0:
			return strconv.FormatInt(v1MemoryUnlimited(), 10), nil
		case name == cgroup.FileMemoryLimit:
			return strconv.FormatInt(v&^(page-1), 10), nil
		case name == cgroup.FileCFSQuota && v != -1 && v < 1000, name == cgroup.FileCFSPeriod && (v < 1000 || v > 1000000):
			return "", syscall.EINVAL
		}
		return strconv.FormatInt(v, 10), nil
	}
	return value, nil
}
