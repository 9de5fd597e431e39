package launch

import (
	"fmt"
	"sync"
)

// Slots counts the live-process slots of each workspace. A slot is held
// from the moment a launch reserves it, before anything is created, until
// the launch is forgotten: a launch in progress counts against max_live
// exactly as a running process does, so requests that race never create
// more processes than there are slots.
type Slots struct {
	// onChange, when set, is called with a workspace whose count of
	// reserved slots changed, without mu held.
	onChange func(workspace string)

	// mu guards the fields that follow.
	mu sync.Mutex
	// held counts reserved and filled slots; reserved the reserved ones
	// alone.
	held     map[string]int64
	reserved map[string]int64
}

// NewSlots returns empty slots; onChange, when not nil, is told about
// every workspace whose count of reserved slots (those held for processes
// not yet created) changes.
func NewSlots(onChange func(workspace string)) *Slots {
	return &Slots{onChange: onChange, held: map[string]int64{}, reserved: map[string]int64{}}
}

// Reserve holds one slot of workspace for a process not yet created, if
// fewer than max are held. It returns an error wrapping ErrWorkspaceBusy
// when max are held already.
func (s *Slots) Reserve(workspace string, max int64) (*Slot, error) {
	s.mu.Lock()
	held := s.held[workspace]
	if held >= max {
		s.mu.Unlock()
		return nil, fmt.Errorf("workspace %q holds %d of %d: %w", workspace, held, max, ErrWorkspaceBusy)
	}
	s.held[workspace] = held + 1
	s.reserved[workspace]++
	s.mu.Unlock()
	s.changed(workspace)
	return &Slot{s: s, workspace: workspace}, nil
}

// restore holds a filled slot of workspace for a process launched before
// a restart, whatever max is now.
func (s *Slots) restore(workspace string) *Slot {
	s.mu.Lock()
	s.held[workspace]++
	s.mu.Unlock()
	return &Slot{s: s, workspace: workspace, state: slotFilled}
}

// Held returns the slots of workspace held now, reserved or filled.
func (s *Slots) Held(workspace string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[workspace]
}

// Reserved returns the slots of workspace held for processes not yet
// created.
func (s *Slots) Reserved(workspace string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reserved[workspace]
}

func (s *Slots) changed(workspace string) {
	if s.onChange != nil {
		s.onChange(workspace)
	}
}

// Slot states.
const (
	slotReserved = iota
	slotFilled
	slotFreed
)

// Slot is one held slot: reserved, then filled by the created process,
// and freed once that process's launch is over. Its methods are safe for
// concurrent use.
type Slot struct {
	s         *Slots
	workspace string
	// state is guarded by s.mu.
	state int
}

// Workspace returns the workspace the slot belongs to.
func (sl *Slot) Workspace() string { return sl.workspace }

// Fill marks the slot as taken by a created process. Filling a filled or
// freed slot does nothing, nor does filling no slot (nil): a launch made
// for a consumer of DevGuard's wire is of no workspace.
func (sl *Slot) Fill() {
	if sl == nil {
		return
	}
	s := sl.s
	s.mu.Lock()
	if sl.state != slotReserved {
		s.mu.Unlock()
		return
	}
	sl.state = slotFilled
	s.reserved[sl.workspace]--
	s.cleanLocked(sl.workspace)
	s.mu.Unlock()
	s.changed(sl.workspace)
}

// Free gives the slot back. Freeing it again does nothing, nor does
// freeing no slot (nil).
func (sl *Slot) Free() {
	if sl == nil {
		return
	}
	s := sl.s
	s.mu.Lock()
	if sl.state == slotFreed {
		s.mu.Unlock()
		return
	}
	wasReserved := sl.state == slotReserved
	if wasReserved {
		s.reserved[sl.workspace]--
	}
	sl.state = slotFreed
	s.held[sl.workspace]--
	s.cleanLocked(sl.workspace)
	s.mu.Unlock()
	if wasReserved {
		s.changed(sl.workspace)
	}
}

// cleanLocked drops the counts of a workspace that holds nothing, so that
// workspaces that come and go leave nothing behind.
func (s *Slots) cleanLocked(workspace string) {
	if s.reserved[workspace] == 0 {
		delete(s.reserved, workspace)
	}
	if s.held[workspace] == 0 {
		delete(s.held, workspace)
	}
}
