package cgroup

import (
	"context"
	"errors"

	"golang.org/x/sys/unix"
)

// SignalTree sends sig to every process in v2 group dir and below it,
// once each, the tree frozen meanwhile: frozen, the processes cannot
// fork, so one pass over the groups finds them all, and each gets the
// signal when the tree thaws, before SignalTree returns. Without a
// freezer it signals until a pass finds no process it has not signalled
// yet. cgroup.kill does this for SIGKILL alone. A missing group is an
// error wrapping ErrNotFound.
func SignalTree(ctx context.Context, fsys FS, dir string, sig unix.Signal) error {
	frozen := false
	switch err := FreezeGroup(fsys, dir, true); {
	case err == nil:
		frozen = true
		defer FreezeGroup(fsys, dir, false)
		if _, err := WaitEvents(ctx, dir, func(ev GroupEvents) bool { return ev.Frozen || !ev.Populated }); err != nil {
			return err
		}
	case !errors.Is(err, errors.ErrUnsupported):
		return err
	}
	signalled := map[int]bool{}
	for {
		fresh := 0
		err := WalkGroups(dir, func(g string) error {
			pids, err := ReadProcs(g)
			if errors.Is(err, ErrNotFound) && g != dir {
				return nil
			}
			for _, pid := range pids {
				if !signalled[pid] {
					signalled[pid] = true
					fresh++
					unix.Kill(pid, sig)
				}
			}
			return err
		})
		if err != nil {
			return err
		}
		if fresh == 0 || frozen {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}
