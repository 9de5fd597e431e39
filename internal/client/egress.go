package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"

	"github.com/marshal-dev/marshal/internal/localapi"
)

// EgressLogQuery selects records of the egress proxy's audit log.
type EgressLogQuery struct {
	// Follow keeps reading records as they are written.
	Follow bool
	// Profile and Workspace, when set, keep only theirs.
	Profile, Workspace string
	// Tail, when not negative, starts with the last Tail records kept.
	Tail int
}

// EgressLog calls fn with each record of the egress audit log that q
// selects, oldest first; with q.Follow, then with each record written
// later, until ctx ends (returning ctx.Err()) or fn fails.
func (c *Client) EgressLog(ctx context.Context, q EgressLogQuery, fn func(localapi.EgressRecord) error) error {
	v := url.Values{}
	if q.Follow {
		v.Set(localapi.FollowParam, "1")
	}
	if q.Profile != "" {
		v.Set(localapi.ProfileParam, q.Profile)
	}
	if q.Workspace != "" {
		v.Set(localapi.WorkspaceParam, q.Workspace)
	}
	if q.Tail >= 0 {
		v.Set(localapi.TailParam, strconv.Itoa(q.Tail))
	}
	err := c.stream(ctx, localapi.EgressLogPath, v, nil, func(line []byte) error {
		var rec localapi.EgressRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("reading the egress log: %w", err)
		}
		return fn(rec)
	})
	if !q.Follow && errors.Is(err, ErrStreamEnded) {
		return nil // the whole log was read
	}
	return err
}
