package runner

import "context"

// Interrupts are the signals that cancel the context Run is given, as
// main catches them.
type Interrupts interface {
	// Ready is closed once the signals are caught. Catching them takes
	// a while, so main starts early and does not wait; a command that
	// must not miss an interrupt waits for Ready before it blocks.
	Ready() <-chan struct{}
	// Restore gives the signals back the dispositions the process
	// started with, for a program it is about to exec.
	Restore()
}

type interruptsKey struct{}

// WithInterrupts returns a copy of ctx that carries in to the commands.
func WithInterrupts(ctx context.Context, in Interrupts) context.Context {
	return context.WithValue(ctx, interruptsKey{}, in)
}

// AwaitInterrupts returns once the signals that cancel ctx are caught,
// or at once when ctx carries none or has ended.
func AwaitInterrupts(ctx context.Context) {
	if in, ok := ctx.Value(interruptsKey{}).(Interrupts); ok {
		select {
		case <-in.Ready():
		case <-ctx.Done():
		}
	}
}

// RestoreInterrupts gives the signals that cancel ctx back their first
// dispositions; call it after AwaitInterrupts.
func RestoreInterrupts(ctx context.Context) {
	if in, ok := ctx.Value(interruptsKey{}).(Interrupts); ok {
		in.Restore()
	}
}
