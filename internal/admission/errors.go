package admission

import (
	"errors"
	"fmt"
)

// Errors of requests. An error answer changed nothing in the journal.
var (
	// ErrInvalidRequest is returned when an argument is malformed: a key
	// that is not 32 lowercase hex digits, a digest that is not 64, a
	// quantity that is not positive, an unknown level or reason.
	ErrInvalidRequest = errors.New("admission: invalid request")
	// ErrUnauthorized is returned when the caller is not a registered
	// owner of this authority's lifetime, its generation is stale, its
	// process is not the one registered, or a launch permit is wrong.
	ErrUnauthorized = errors.New("admission: unauthorized")
	// ErrNotFound is returned when the caller owns no attempt with that
	// key; an attempt of another owner is not found either.
	ErrNotFound = errors.New("admission: attempt not found")
	// ErrAttemptConflict is returned by Admit when the key is already
	// used with another digest, intent or owner, and by RegisterInstance
	// when the instance is another process's.
	ErrAttemptConflict = errors.New("admission: attempt conflict")
	// ErrInstancesFull is returned by RegisterInstance when the consumer
	// has as many instances as it may.
	ErrInstancesFull = errors.New("admission: consumer instances full")
	// ErrInvalidTransition is returned when the attempt's phase does not
	// allow the request.
	ErrInvalidTransition = errors.New("admission: invalid transition")
	// ErrEvidence is returned when evidence handed in does not confirm
	// what it must: stale, for another scope, or a planned limit not
	// applied.
	ErrEvidence = errors.New("admission: evidence not confirmed")
	// ErrUnavailable is returned when the authority cannot decide: no
	// host capacity or no enforcement plan has been set yet.
	ErrUnavailable = errors.New("admission: authority unavailable")
	// ErrClosed is returned when the authority is not running: Run has
	// returned, or the authority was closed.
	ErrClosed = errors.New("admission: authority closed")
	// ErrJournalFailed is returned when the journal could not commit the
	// request (its file system is full, a write failed): nothing of it was
	// recorded. The next request tries again. It is returned for every
	// request once the journal is fenced (see ErrOutcomeUnknown).
	ErrJournalFailed = errors.New("admission: journal failed")
	// ErrOutcomeUnknown is returned when a commit reported failure yet
	// the journal holds it: what the request did is unknown. The authority
	// is fenced from then on, refusing every request with ErrJournalFailed
	// until it is reopened.
	ErrOutcomeUnknown = errors.New("admission: outcome unknown")
)

// Errors of Create and Open. None of them changed the file.
var (
	// ErrJournalMissing is returned by Open when the journal file does not
	// exist; only Create makes one.
	ErrJournalMissing = errors.New("admission: journal missing")
	// ErrJournalExists is returned by Create when the path exists.
	ErrJournalExists = errors.New("admission: journal already exists")
	// ErrJournalCorrupt is returned when the file is not a readable bbolt
	// database, or fails its consistency check.
	ErrJournalCorrupt = errors.New("admission: journal corrupt")
	// ErrJournalForeign is returned when the file is a bbolt database but
	// not an admission journal.
	ErrJournalForeign = errors.New("admission: not an admission journal")
	// ErrJournalSchema is returned, inside a *SchemaError, when the
	// journal has a schema this build does not know.
	ErrJournalSchema = errors.New("admission: unknown journal schema")
	// ErrJournalInconsistent is returned when a record is invalid or the
	// charged totals do not equal what the records add up to.
	ErrJournalInconsistent = errors.New("admission: journal inconsistent")
	// ErrJournalInUse is returned when another process holds the
	// journal's lock.
	ErrJournalInUse = errors.New("admission: journal in use")
)

// SchemaError says which schema a journal has.
type SchemaError struct {
	Found string
	Want  string
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("admission: journal schema %q, this build reads %q", e.Found, e.Want)
}

// Unwrap makes errors.Is(err, ErrJournalSchema) true.
func (e *SchemaError) Unwrap() error { return ErrJournalSchema }

// ErrNoProcess is returned by an Inspector when the pid is not a running
// process (gone, or a zombie).
var ErrNoProcess = errors.New("admission: no such process")
