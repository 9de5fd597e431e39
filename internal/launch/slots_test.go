package launch

import (
	"errors"
	"sync"
	"testing"
)

// Slots held for processes not yet created count: requests racing for a
// workspace's slots get exactly max of them.
func TestSlotsRacingGetExactlyMax(t *testing.T) {
	s := NewSlots(nil)
	const n, max = 12, 3
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		got   []*Slot
		busy  int
		start = make(chan struct{})
	)
	for range n {
		wg.Go(func() {
			<-start
			sl, err := s.Reserve("web", max)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				got = append(got, sl)
			case errors.Is(err, ErrWorkspaceBusy):
				busy++
			default:
				t.Errorf("Reserve = %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(got) != max || busy != n-max || s.Held("web") != max || s.Reserved("web") != max {
		t.Fatalf("%d reserved, %d busy, held %d, reserved %d; want %d, %d", len(got), busy, s.Held("web"), s.Reserved("web"), max, n-max)
	}
}

func TestSlotLifecycle(t *testing.T) {
	var changes []string
	s := NewSlots(func(w string) { changes = append(changes, w) })
	steps := []struct {
		name           string
		do             func(*Slot)
		held, reserved int64
	}{
		{"reserved", func(*Slot) {}, 1, 1},
		{"filled", (*Slot).Fill, 1, 0},
		{"filled_again", (*Slot).Fill, 1, 0},
		{"freed", (*Slot).Free, 0, 0},
		{"freed_again", (*Slot).Free, 0, 0},
		{"filled_after_free", (*Slot).Fill, 0, 0},
	}
	sl, err := s.Reserve("web", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		st.do(sl)
		if s.Held("web") != st.held || s.Reserved("web") != st.reserved {
			t.Errorf("%s: held %d, reserved %d; want %d, %d", st.name, s.Held("web"), s.Reserved("web"), st.held, st.reserved)
		}
	}
	if len(changes) != 2 {
		t.Errorf("changes = %v, want reserve and fill: freeing a filled slot leaves the reserved ones", changes)
	}
	// A slot freed before it was filled gives back its reservation.
	sl, _ = s.Reserve("web", 1)
	sl.Free()
	if s.Held("web") != 0 || s.Reserved("web") != 0 || len(s.held) != 0 || len(s.reserved) != 0 {
		t.Errorf("held %v, reserved %v; want nothing left", s.held, s.reserved)
	}
}

// Slots restored after a restart count against max_live whatever it is
// now, and a lowered max_live refuses until enough are freed.
func TestRestoredSlotsCount(t *testing.T) {
	s := NewSlots(nil)
	a, b := s.restore("web"), s.restore("web")
	if _, err := s.Reserve("web", 2); !errors.Is(err, ErrWorkspaceBusy) {
		t.Fatalf("Reserve with 2 restored = %v, want busy", err)
	}
	a.Free()
	if _, err := s.Reserve("web", 1); !errors.Is(err, ErrWorkspaceBusy) {
		t.Fatal("a lowered max_live was not honoured")
	}
	b.Free()
	if _, err := s.Reserve("web", 1); err != nil {
		t.Fatal(err)
	}
}
