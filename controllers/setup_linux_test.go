package controllers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/events"
	"github.com/marshal-dev/marshal/internal/testutil"
)

func TestSetupRefusesWhatCannotWork(t *testing.T) {
	h := newHarness(t, controllers.FakeKernel(t), harnessOptions{})
	rec, _ := events.New(events.Options{})
	partial := controllers.NewStores()
	partial.Scopes = nil
	tests := []struct {
		name string
		run  func() error
	}{
		{name: "nil_stores", run: func() error { _, err := controllers.Setup(nil, h.backend, rec, controllers.Options{}); return err }},
		{name: "missing_store", run: func() error {
			_, err := controllers.Setup(partial, h.backend, rec, controllers.Options{})
			return err
		}},
		{name: "no_backend", run: func() error {
			_, err := controllers.Setup(controllers.NewStores(), nil, rec, controllers.Options{})
			return err
		}},
		{name: "no_recorder", run: func() error {
			_, err := controllers.Setup(controllers.NewStores(), h.backend, nil, controllers.Options{})
			return err
		}},
		{name: "negative_interval", run: func() error {
			_, err := controllers.Setup(controllers.NewStores(), h.backend, rec, controllers.Options{Interval: -1})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(); !errors.Is(err, controllers.ErrInvalidSetup) {
				t.Errorf("Setup = %v, want ErrInvalidSetup", err)
			}
		})
	}
}

// Start runs once; it returns nil when its context ends, after
// everything it started stopped (goleak checks the rest).
func TestManagerRunsOnce(t *testing.T) {
	h := newHarness(t, controllers.FakeKernel(t), harnessOptions{})
	m, err := controllers.Setup(h.s, h.backend, h.rec, h.opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	h.waitFor("the host reconciled", func() bool { return h.s.Hosts.Len() == 1 })
	if err := m.Start(ctx); !errors.Is(err, controllers.ErrAlreadyStarted) {
		t.Errorf("second Start = %v, want ErrAlreadyStarted", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start = %v after cancel, want nil", err)
		}
	case <-time.After(testutil.Deadline):
		t.Fatalf("Start did not return %v after cancel", testutil.Deadline)
	}
}
