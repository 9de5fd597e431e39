package devguardwire

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/marshal-dev/marshal/internal/peer"
)

// Client is a session with an authority on DevGuard's wire, as the
// launch helper needs it: hello, then one request. It checks what
// DevGuard's client checks: the authority is of this process's uid and
// is the process hello names, the caller hello names is this process,
// and the bounds are exactly DevGuard's.
type Client struct {
	conn *net.UnixConn
	next uint64
	buf  []byte
}

// AnswerWithin bounds a Client's connect and each of its requests, the
// write and the wait for the answer, in place of DevGuard's
// FrameDeadline. The helper's one request makes the attempt's scope and
// commits to the journal before it is answered, which a busy host can
// take well over 250 ms to do; and an answer given up on is lost work,
// never an authorization, for the helper does not exec without one. The
// owner bounds the launch as a whole by waiting on the helper's report.
const AnswerWithin = 30 * time.Second

// Dial connects to the authority at path and says hello asking for
// required.
func Dial(path string, required ...Capability) (*Client, error) {
	d := net.Dialer{Timeout: AnswerWithin}
	nc, err := d.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	c := &Client{conn: nc.(*net.UnixConn), next: 1}
	if err := c.hello(required); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close ends the session.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) hello(required []Capability) error {
	authority, err := peer.Credentials(c.conn)
	if err != nil {
		return err
	}
	if authority.UID != uint32(os.Geteuid()) {
		return fmt.Errorf("the authority's uid is %d, not %d: %w", authority.UID, os.Geteuid(), ErrUnexpected)
	}
	if required == nil {
		required = []Capability{}
	}
	var h hello
	params := map[string]any{"compatibility": map[string]any{"minimum_protocol": Protocol, "maximum_protocol": Protocol, "required": required}}
	if err := c.call(MethodHello, params, "hello", &h); err != nil {
		return err
	}
	switch {
	case h.Authority != (peerID{authority.UID, uint32(authority.PID)}):
		return fmt.Errorf("hello names another authority than the socket's peer: %w", ErrUnexpected)
	case h.Caller != (peerID{uint32(os.Geteuid()), uint32(os.Getpid())}):
		return fmt.Errorf("hello names another caller: %w", ErrUnexpected)
	case h.Protocol != Protocol || h.MaxFrameBytes != MaxFrameBytes || h.MaxSessions != MaxSessions ||
		h.FrameDeadlineMS != uint64(FrameDeadline.Milliseconds()):
		return fmt.Errorf("hello states other bounds: %w", ErrUnexpected)
	}
	for _, r := range required {
		if !slices.Contains(h.Capabilities, r) {
			return &ErrRefused{Code: CodeResourcePolicyUnsupported}
		}
	}
	return nil
}

// Launch presents the grant of key as its helper, for the owner's
// instance, and returns whether the run may exec.
func (c *Client) Launch(key Key, instanceID string, permit Secret) (mayExec bool, err error) {
	var a struct {
		Attempt json.RawMessage `json:"attempt"`
		MayExec bool            `json:"may_exec"`
	}
	params := map[string]any{"key": key, "instance_id": instanceID, "permit": permit.Expose()}
	if err := c.call(MethodLaunch, params, "launch_authorized", &a); err != nil {
		return false, err
	}
	return a.MayExec, nil
}

// call sends one request and reads its answer, whose value, of result
// result, is decoded into out.
func (c *Client) call(method Method, params any, result string, out any) error {
	id := c.next
	c.next++
	req, err := json.Marshal(map[string]any{"version": WireVersion, "request_id": id, "body": map[string]any{"method": method, "params": params}})
	if err != nil {
		return err
	}
	if err := WriteFrame(c.conn, req, AnswerWithin); err != nil {
		return err
	}
	frame, err := ReadFrame(c.conn, c.buf, AnswerWithin)
	if err != nil {
		return err
	}
	c.buf = frame
	var env struct {
		Version   uint32 `json:"version"`
		RequestID uint64 `json:"request_id"`
		Body      struct {
			Result string          `json:"result"`
			Value  json.RawMessage `json:"value"`
		} `json:"body"`
	}
	if err := json.Unmarshal(frame, &env); err != nil {
		return fmt.Errorf("%w: %w", ErrUnexpected, err)
	}
	if env.Version != WireVersion || env.RequestID != id {
		return fmt.Errorf("an answer of version %d to request %s: %w", env.Version, strconv.FormatUint(env.RequestID, 10), ErrUnexpected)
	}
	if env.Body.Result == "error" {
		var e wireError
		if err := json.Unmarshal(env.Body.Value, &e); err != nil {
			return fmt.Errorf("%w: %w", ErrUnexpected, err)
		}
		return &ErrRefused{Code: e.Code}
	}
	if env.Body.Result != result {
		return fmt.Errorf("an answer %q to %s: %w", env.Body.Result, method, ErrUnexpected)
	}
	return json.Unmarshal(env.Body.Value, out)
}
