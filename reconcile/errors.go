package reconcile

import (
	"errors"
	"fmt"
)

var (
	// ErrTerminal is matched by errors.Is for every error made by
	// TerminalError: the Controller does not retry it.
	ErrTerminal = errors.New("terminal error")
	// ErrAlreadyStarted is returned by Controller.Start when the controller
	// was started before. A controller runs once; make a new one to run
	// again.
	ErrAlreadyStarted = errors.New("controller already started")
	// ErrInvalidOptions is returned by NewController when its name,
	// reconciler or options cannot work; the wrapping error says which.
	ErrInvalidOptions = errors.New("invalid controller options")
	// ErrInvalidKey is returned when a key has an empty kind or name, or a
	// string is not of the form "Kind/name".
	ErrInvalidKey = errors.New("invalid key")
	// ErrInvalidObject is returned by DesiredStore.Set for an object it
	// cannot store: nil, not a pointer to an API struct, or without a
	// kind or name.
	ErrInvalidObject = errors.New("invalid object")
)

// PanicError is the error a Controller records when a Reconcile call
// panics. The key is retried with backoff like any other error; the stack
// is logged.
type PanicError struct {
	// Value is what the reconciler panicked with.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("reconcile panicked: %v", e.Value)
}

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
