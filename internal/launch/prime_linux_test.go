package launch

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// primer is a backend that tells each PrimeMove and answers it with err.
type primer struct {
	Scopes
	called chan struct{}
	err    error
}

func (p *primer) PrimeMove() error {
	err := p.err // read before the test hears of the call, and may set it
	p.called <- struct{}{}
	return err
}

// Each launch primes its move, in either mode; once priming failed it is
// never asked again.
func TestLaunchPrimesItsMove(t *testing.T) {
	eachMode(t, func(t *testing.T, h *harness) {
		p := &primer{called: make(chan struct{}, 8)}
		h.wrapScopes = func(s Scopes) Scopes {
			p.Scopes = s
			return p
		}
		h.workspace("web", v1alpha1.ParticipationRequired, 4)
		h.start()
		primed := func() {
			t.Helper()
			select {
			case <-p.called:
			case <-time.After(testutil.Deadline):
				t.Fatalf("a launch did not prime its move after %v", testutil.Deadline)
			}
		}
		launchOne := func() {
			c, plan := h.launch(h.request("web"))
			c.exit(t)
			h.settle(plan)
		}
		launchOne()
		primed()
		p.err = fmt.Errorf("priming a move: %w", syscall.EACCES)
		launchOne()
		primed()
		launchOne()
		launchOne()
		if len(p.called) != 0 {
			t.Errorf("%d launches primed their move after priming failed", len(p.called))
		}
	})
}
