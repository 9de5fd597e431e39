package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
)

// EgressQuery says which records of the egress audit log a reader gets.
type EgressQuery struct {
	// Follow keeps reading the records written after those kept now.
	Follow bool
	// Tail, when 0 or more, keeps only the last Tail records of those
	// kept now; -1 keeps them all.
	Tail int
	// Profile and Workspace, when set, keep only one profile's or one
	// workspace's records.
	Profile, Workspace string
}

// keeps reports whether q keeps the record line.
func (q EgressQuery) keeps(line []byte) bool {
	if q.Profile == "" && q.Workspace == "" {
		return true
	}
	var rec struct {
		Profile   string `json:"profile"`
		Workspace string `json:"workspace"`
	}
	if json.Unmarshal(line, &rec) != nil {
		return false
	}
	return (q.Profile == "" || rec.Profile == q.Profile) && (q.Workspace == "" || rec.Workspace == q.Workspace)
}

// EgressReader reads an audit log as Daemon.EgressLog does, every record
// and without a query; egress.Log.Read is one.
type EgressReader func(ctx context.Context, follow bool, fn func(record []byte) error, caughtUp func() error) error

// Select reads with read and hands fn only the records q selects: of
// those kept now, the last Tail, just before caughtUp is called; then,
// with Follow, each later one as it is written.
func (q EgressQuery) Select(ctx context.Context, read EgressReader, fn func(record []byte) error, caughtUp func() error) error {
	var (
		live bool
		// last holds the newest Tail records selected, until the records
		// kept now are read.
		last [][]byte
	)
	onRecord := func(line []byte) error {
		switch {
		case !q.keeps(line):
			return nil
		case live || q.Tail < 0:
			return fn(line)
		case q.Tail == 0:
			return nil
		}
		if len(last) == q.Tail {
			last = append(last[:0], last[1:]...)
		}
		last = append(last, bytes.Clone(line))
		return nil
	}
	onCaughtUp := func() error {
		for _, line := range last {
			if err := fn(line); err != nil {
				return err
			}
		}
		last, live = nil, true
		return caughtUp()
	}
	return read(ctx, q.Follow, onRecord, onCaughtUp)
}
