package admission

import (
	"container/heap"
	"errors"
	"fmt"
	"runtime/debug"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// A failed commit, and what follows it.
//
// bbolt writes a commit's pages to space that is free as of the last
// commit, syncs them, and only then writes and syncs the meta page that
// makes the commit the journal's state. A commit that fails before its
// meta page is written (the file cannot grow, a page write finds the
// file system full, the data sync fails) thus leaves the journal as the
// last commit left it; bbolt's rollback rebuilds its free list from that
// state. The ledger changes only after a commit succeeds, so it still
// matches the journal. The one thing a failed batch used up is the
// deadline heap, from which expiry popped the attempts it expired: it is
// rebuilt from the prepared attempts, which the batch did not change.
//
// Whether the meta page was written is read back from the journal: its
// transaction ID. A commit that reported failure although the journal
// holds it (its meta sync failed) did what it did, and its requests were
// not answered: the authority is fenced, refusing everything, and the
// journal is judged by Open's checks at the next start. So is a log
// entry whose write or sync failed: the kernel may have written any part
// of it, and whether it is whole is read at the next start.
//
// A journal that is not fenced tries every new request: admission
// resumes by itself with the first commit that succeeds, once the file
// system has space again. On a full disk a small commit may still fit in
// pages the journal freed earlier, while the next that must grow the file
// fails: so a failure for want of space is cleared only by a commit made
// while the file system has roomToGrow free. Expiry waits between tries,
// so a full disk is not written to in a loop.

// roomToGrow is the free space after which a journal that failed for
// want of space counts as able to grow again: well above what a commit
// of many requests adds.
const roomToGrow = 1 << 20

// Waits between tries of an expiry that failed to commit.
const (
	minRetry = time.Second
	maxRetry = 30 * time.Second
)

// journalState says whether the journal's last commit failed. Authority.mu
// guards it.
type journalState struct {
	// err is the failure of the last commit, nil when it succeeded.
	err error
	// since is when commits began to fail.
	since time.Time
	// full reports that err is for want of space.
	full bool
	// fenced reports that the journal holds a commit whose outcome is
	// unknown: everything is refused until the journal is reopened.
	fenced bool
}

func (j journalState) reason() NotReady {
	switch {
	case j.fenced:
		return NotReadyJournalUnknown
	case j.full:
		return NotReadyJournalFull
	}
	return NotReadyJournalFailed
}

// fenced returns the error every request gets once the journal is fenced,
// nil before.
func (a *Authority) fenced() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.journal.fenced {
		return nil
	}
	return fmt.Errorf("%w: a failed commit's outcome is unknown; restart marshald: %w", ErrJournalFailed, a.journal.err)
}

// journalFull reports whether err is for want of space: the file system
// is full, the quota is spent, or the journal reached its size limit.
func journalFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		errors.Is(err, syscall.EFBIG) || errors.Is(err, bolterrors.ErrMaxSizeReached)
}

// commitFailed records that a batch failed with cause, fencing the
// journal when the commit's outcome is unknown, and returns the error the
// batch's requests are answered with. It runs on the writer goroutine.
func (a *Authority) commitFailed(cause error, fenced bool) error {
	a.restoreDue()
	a.retry = min(max(2*a.retry, minRetry), maxRetry)
	a.retryAt = a.clock.Now().Add(a.retry)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.journal.err == nil {
		a.journal.since = a.clock.Now()
	}
	a.journal.err, a.journal.full = cause, journalFull(cause)
	a.journal.fenced = a.journal.fenced || fenced
	a.notifyLocked()
	if fenced {
		return fmt.Errorf("%w: the commit reported %w, and may be in the journal", ErrOutcomeUnknown, cause)
	}
	return fmt.Errorf("%w: nothing was recorded: %w", ErrJournalFailed, cause)
}

// committedLocked clears the failure once a commit succeeded, and for a
// failure for want of space, once the file system has room again. The
// caller holds a.mu.
func (a *Authority) committedLocked() {
	if a.journal.err == nil || a.journal.fenced {
		return
	}
	if a.journal.full {
		if free, ok := freeBytes(a.db.Path()); ok && free < roomToGrow {
			return
		}
	}
	a.retry, a.retryAt = 0, time.Time{}
	a.journal = journalState{}
}

// journalHolds reports whether the journal's state is transaction txid
// or later, as its meta page says. A journal that cannot be read holds
// whatever it holds: that is not known either.
func (a *Authority) journalHolds(txid int) (holds bool) {
	defer func() {
		if r := recover(); r != nil {
			holds = true
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	err := a.db.View(func(tx *bolt.Tx) error {
		holds = tx.ID() >= txid
		return nil
	})
	return holds || err != nil
}

// restoreDue rebuilds the deadline heap from the prepared attempts.
func (a *Authority) restoreDue() {
	due := a.led.due[:0]
	for id, at := range a.led.prepared {
		due = append(due, deadline{at, id})
	}
	heap.Init(&due)
	a.led.due = due
}

// notifyLocked wakes the watchers of Changed. The caller holds a.mu.
func (a *Authority) notifyLocked() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// JournalError returns why the journal's last commit failed, nil when it
// succeeded. It is for the daemon's log: it carries the system's words.
func (a *Authority) JournalError() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.journal.err
}
