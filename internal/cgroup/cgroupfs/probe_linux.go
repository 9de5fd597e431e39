package cgroupfs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
)

// probeValues are the limits Probe writes in its scratch group: small
// enough to pass below any parent's limit in a v1 hierarchy, and exact
// (the memory value is page aligned) so that reading back must match.
var probeValues = map[cgroup.Resource]int64{
	cgroup.CPU:    10, // a 1 ms quota per 100 ms: the kernel's minimum
	cgroup.Memory: 64 << 20,
	cgroup.PIDs:   64,
}

// Probe reports, per resource, the firmest enforcement this host gives:
// kernel through a cgroup v2 controller that the tree's nearest existing
// group can enable, or kernel through a cgroup v1 controller that took and
// read back a limit in a scratch group (created below Root and removed
// again); else cooperative scheduling priority for cpu, and bookkeeping
// for memory and pids.
func (b *Backend) Probe(ctx context.Context) (cgroup.Capabilities, error) {
	// Probe's scratch groups may create Root in a v1 hierarchy and remove
	// it again, which must not race a slice being created there.
	b.mu.Lock()
	defer b.mu.Unlock()
	caps := cgroup.Capabilities{}
	var errs []error
	for _, r := range cgroup.AllResources {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ok bool
		var err error
		switch m := b.methods[r]; m {
		case cgroup.MethodCgroupV2:
			ok, err = b.probeV2(r)
		case cgroup.MethodCgroupV1:
			ok, err = b.probeV1(r)
		}
		if err != nil {
			errs = append(errs, err)
		}
		switch {
		case ok:
			m := b.methods[r]
			caps[r] = cgroup.Enforcement{Level: v1alpha1.LevelKernel, Method: m, Controller: cgroup.LimitFile(r, m)}
		case r == cgroup.CPU:
			caps[r] = cgroup.Enforcement{Level: v1alpha1.LevelCooperative, Method: cgroup.MethodQoS}
		default:
			caps[r] = cgroup.Enforcement{Level: v1alpha1.LevelAccounted, Method: cgroup.MethodAccounting}
		}
	}
	// A resource whose probe failed is reported at the level that needs no
	// controller; the error says why it is not higher.
	return caps, errors.Join(errs...)
}

// probeV2 reports whether r's controller can be enabled for the tree: it
// is listed in cgroup.controllers of the nearest existing group on the way
// to the tree, from where EnsureSlice enables it downwards.
func (b *Backend) probeV2(r cgroup.Resource) (bool, error) {
	dir := b.v2(b.tree)
	for {
		if _, err := os.Stat(dir); err == nil || dir == b.mounts.V2 {
			break
		}
		dir = filepath.Dir(dir)
	}
	avail, err := cgroup.ReadFile(dir, cgroup.FileControllers)
	if err != nil {
		return false, fmt.Errorf("probing %s: %w", r, err)
	}
	return slices.Contains(strings.Fields(avail), cgroup.Controller(r)), nil
}

// probeV1 writes a limit for r in a scratch group of r's v1 hierarchy and
// reports whether reading it back gave the value written. It removes the
// scratch group, and any group on the way to it that it had to create.
func (b *Backend) probeV1(r cgroup.Resource) (ok bool, err error) {
	var suffix [6]byte
	rand.Read(suffix[:])
	scratch := b.v1(r, filepath.Join(b.root, "marshal-probe-"+hex.EncodeToString(suffix[:])))
	created, err := mkdirChain(scratch)
	defer func() {
		for _, dir := range slices.Backward(created) {
			rerr := cgroup.RemoveGroup(dir)
			if rerr != nil && (dir == scratch || !errors.Is(rerr, cgroup.ErrBusy)) {
				// A group on the way that is busy now holds someone
				// else's group: it stays, as it would had it existed.
				err = errors.Join(err, fmt.Errorf("probing %s: %w", r, rerr))
			}
		}
	}()
	if err != nil {
		return false, fmt.Errorf("probing %s: %w", r, err)
	}
	want := probeValues[r]
	got, _, err := cgroup.SetLimit(scratch, r, cgroup.MethodCgroupV1, want)
	if err != nil {
		return false, fmt.Errorf("probing %s: %w", r, err)
	}
	return got == want, nil
}

// mkdirChain creates dir and every missing group on the way to it, and
// returns the ones it created, parents first.
func mkdirChain(dir string) ([]string, error) {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) || d == filepath.Dir(d) {
			return nil, err
		}
		missing = append(missing, d)
	}
	var created []string
	for _, d := range slices.Backward(missing) {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return created, err
		} else if err == nil {
			created = append(created, d)
		}
	}
	return created, nil
}
