package cgroupfs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"

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

// Probe reports, per resource, the firmest enforcement this host gives,
// having made the kernel take and read back a limit in a scratch group
// below Root (removed again, with any group on the way it had to
// create): kernel through the cgroup v2 controller, enabled in Root's
// cgroup.subtree_control as EnsureSlice would; or kernel through the
// cgroup v1 controller of a hybrid host. Else cooperative scheduling
// priority for cpu and bookkeeping for memory and pids, with the reason
// when a controller is there but not given to marshal's tree.
//
// The host's reported levels, the admission plan and doctor all come
// from here, so they cannot disagree.
func (b *Backend) Probe(ctx context.Context) (cgroup.Capabilities, error) {
	// Probe's scratch groups may create Root and remove it again, which
	// must not race a slice being created there.
	b.mu.Lock()
	defer b.mu.Unlock()
	caps := cgroup.Capabilities{}
	var errs []error
	for _, r := range cgroup.AllResources {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m := b.methods[r]
		var (
			reason string
			err    error
		)
		switch m {
		case cgroup.MethodCgroupV2, cgroup.MethodCgroupV1:
			reason, err = b.probe(r, m)
		default:
			reason = fmt.Sprintf("no cgroup hierarchy here has the %s controller", cgroup.Controller(r))
		}
		if err != nil {
			errs = append(errs, err)
		}
		if err == nil && reason == "" {
			caps[r] = cgroup.KernelEnforcement(r, m)
		} else {
			caps[r] = cgroup.BelowKernel(r, reason)
		}
	}
	// A resource whose probe failed is reported at the level that needs no
	// controller; the error says why it is not higher.
	return caps, errors.Join(errs...)
}

// probe writes a limit for r under method m in a scratch group below
// Root and reads it back. It returns why the kernel cannot hold r's
// limits for marshal's tree ("" when it can), or an error when probing
// itself failed.
func (b *Backend) probe(r cgroup.Resource, m cgroup.Method) (reason string, err error) {
	var suffix [6]byte
	rand.Read(suffix[:])
	rel := path.Join(b.root, "marshal-probe-"+hex.EncodeToString(suffix[:]))
	scratch := b.limitDir(r, rel)
	created, err := cgroup.MkdirAll(b.fs, scratch)
	if m == cgroup.MethodCgroupV2 && len(created) > 1 {
		// Root stays: Watch makes marshal's tree in it without the lock
		// that orders Probe against the rest, and EnsureSlice would make
		// it anyway.
		created = created[len(created)-1:]
	}
	defer func() {
		for _, dir := range slices.Backward(created) {
			rerr := cgroup.RemoveGroup(b.fs, dir)
			if rerr != nil && (dir == scratch || !errors.Is(rerr, cgroup.ErrBusy)) {
				// A group on the way that is busy now holds someone
				// else's group: it stays, as it would had it existed.
				err = errors.Join(err, fmt.Errorf("probing %s: %w", r, rerr))
			}
		}
	}()
	if err != nil {
		return "", fmt.Errorf("probing %s: %w", r, err)
	}
	if m == cgroup.MethodCgroupV2 {
		rels := []string{b.root}
		if _, err := os.Stat(b.v2(b.tree)); err == nil {
			rels = append(rels, b.tree)
		}
		err := b.enableDown(rels, []string{cgroup.Controller(r)})
		if errors.Is(err, errNoDelegation) {
			return err.Error(), nil
		}
		if err != nil {
			return "", fmt.Errorf("probing %s: %w", r, err)
		}
	}
	want := probeValues[r]
	got, _, err := cgroup.SetLimit(b.fs, scratch, r, m, want)
	if err != nil {
		return "", fmt.Errorf("probing %s: %w", r, err)
	}
	if got != want {
		return fmt.Sprintf("%s took %d and read back %d", cgroup.LimitFile(r, m), want, got), nil
	}
	return "", nil
}
