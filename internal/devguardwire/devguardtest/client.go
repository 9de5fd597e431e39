package devguardtest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// The bounds a client expects hello to state exactly.
const (
	MaxFrameBytes   = 65536
	FrameDeadline   = 250 * time.Millisecond
	MaxSessions     = 32
	ProtocolVersion = 1
)

// Within bounds every wait of this client: a connect, a frame written,
// an answer read, the end of a session awaited. It is a failure bound,
// not DevGuard's frame deadline: the authority's deadline is what tests
// check (hello states it exactly, the server closes a session idle past
// it), and a correct answer that a busy machine makes slow is no
// failure of the authority's.
const Within = testutil.Deadline

// Error is an error answer.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// ErrBadAnswer is returned for an answer this client refuses: another
// version or request id, an unknown field, a result it did not ask for.
var ErrBadAnswer = errors.New("devguardtest: answer refused")

// Peer is a process as hello names it.
type Peer struct {
	UID uint32 `json:"uid"`
	PID uint32 `json:"pid"`
}

// Hello is hello's answer.
type Hello struct {
	Protocol        uint32   `json:"protocol"`
	Authority       Peer     `json:"authority"`
	Caller          Peer     `json:"caller"`
	Capabilities    []string `json:"capabilities"`
	MaxFrameBytes   int      `json:"max_frame_bytes"`
	FrameDeadlineMS uint64   `json:"frame_deadline_ms"`
	MaxSessions     int      `json:"max_sessions"`
}

// Compatibility is what hello asks for.
type Compatibility struct {
	MinimumProtocol uint32   `json:"minimum_protocol"`
	MaximumProtocol uint32   `json:"maximum_protocol"`
	Required        []string `json:"required"`
}

// CodeSpace is what CodeSpace's launch sessions ask hello for.
var CodeSpace = Compatibility{1, 1, []string{"static_control_reservations", "durable_admission", "fenced_launch"}}

// HelperCompat is what a launch helper asks for.
var HelperCompat = Compatibility{1, 1, []string{"fenced_launch"}}

// Client is one session.
type Client struct {
	conn *net.UnixConn
	next uint64
	// Hello is what hello answered.
	Hello Hello
	// Raw is the value of the last answer, as it came.
	Raw json.RawMessage
}

// Connect connects to path, checks the peer is
// of this process's uid, and says hello as request 1. An error answer to
// hello is returned as *Error, with the connection closed.
func Connect(path string, compat Compatibility) (*Client, error) {
	c, err := Dial(path)
	if err != nil {
		return nil, err
	}
	if err := c.Greet(compat); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Dial connects without saying hello, for tests of what comes first.
func Dial(path string) (*Client, error) {
	d := net.Dialer{Timeout: Within}
	nc, err := d.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	return &Client{conn: nc.(*net.UnixConn), next: 1}, nil
}

// Close ends the session.
func (c *Client) Close() error { return c.conn.Close() }

// peerCred is the authority's credentials, as the kernel gives them.
func (c *Client) peerCred() (Peer, error) {
	raw, err := c.conn.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return Peer{}, err
	}
	if cerr != nil {
		return Peer{}, cerr
	}
	return Peer{UID: cred.Uid, PID: uint32(cred.Pid)}, nil
}

// Greet says hello as request 1 and checks its answer as Connect does,
// for a session dialled first.
func (c *Client) Greet(compat Compatibility) error {
	authority, err := c.peerCred()
	if err != nil {
		return err
	}
	if authority.UID != uint32(os.Geteuid()) {
		return fmt.Errorf("authority uid %d, want %d: %w", authority.UID, os.Geteuid(), ErrBadAnswer)
	}
	var h Hello
	if err := c.Call("hello", map[string]any{"compatibility": compat}, "hello", &h); err != nil {
		return err
	}
	switch {
	case h.Authority != authority:
		return fmt.Errorf("hello names authority %+v, the socket's peer is %+v: %w", h.Authority, authority, ErrBadAnswer)
	case h.Caller != (Peer{UID: uint32(os.Geteuid()), PID: uint32(os.Getpid())}):
		return fmt.Errorf("hello names caller %+v: %w", h.Caller, ErrBadAnswer)
	case h.MaxFrameBytes != MaxFrameBytes || h.FrameDeadlineMS != uint64(FrameDeadline.Milliseconds()) || h.MaxSessions != MaxSessions:
		return fmt.Errorf("hello states bounds %d/%d/%d: %w", h.MaxFrameBytes, h.FrameDeadlineMS, h.MaxSessions, ErrBadAnswer)
	case h.Protocol < compat.MinimumProtocol || h.Protocol > compat.MaximumProtocol:
		return fmt.Errorf("hello states protocol %d: %w", h.Protocol, ErrBadAnswer)
	}
	for _, want := range compat.Required {
		if !slices.Contains(h.Capabilities, want) {
			return fmt.Errorf("hello does not state %s: %w", want, ErrBadAnswer)
		}
	}
	c.Hello = h
	return nil
}

// envelope is a request frame.
type envelope struct {
	Version   uint32 `json:"version"`
	RequestID uint64 `json:"request_id"`
	Body      any    `json:"body"`
}

type body struct {
	Method string `json:"method"`
	Params any    `json:"params,omitempty"`
}

// Call sends method with params (nil: none) as the next request, and
// decodes the value of the answer, whose result must be result, into out
// (nil: not decoded) strictly. An error answer is *Error.
func (c *Client) Call(method string, params any, result string, out any) error {
	id := c.next
	c.next++
	payload, err := json.Marshal(envelope{ProtocolVersion, id, body{method, params}})
	if err != nil {
		return err
	}
	if err := c.Send(payload); err != nil {
		return err
	}
	return c.ReadAnswer(id, result, out)
}

// Send writes payload as one frame.
func (c *Client) Send(payload []byte) error {
	return c.SendFrame(uint32(len(payload)), payload)
}

// SendFrame writes a frame whose header says n, whatever payload holds:
// for tests of frames out of bounds.
func (c *Client) SendFrame(n uint32, payload []byte) error {
	frame := append(binary.BigEndian.AppendUint32(nil, n), payload...)
	if err := c.conn.SetWriteDeadline(time.Now().Add(Within)); err != nil {
		return err
	}
	_, err := c.conn.Write(frame)
	return err
}

// ReadAnswer reads the answer to request id.
func (c *Client) ReadAnswer(id uint64, result string, out any) error {
	if err := c.conn.SetReadDeadline(time.Now().Add(Within)); err != nil {
		return err
	}
	var h [4]byte
	if _, err := io.ReadFull(c.conn, h[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n == 0 || n > MaxFrameBytes {
		return fmt.Errorf("answer frame of %d bytes: %w", n, ErrBadAnswer)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(c.conn, data); err != nil {
		return err
	}
	var env struct {
		Version   uint32 `json:"version"`
		RequestID uint64 `json:"request_id"`
		Body      struct {
			Result string          `json:"result"`
			Value  json.RawMessage `json:"value"`
		} `json:"body"`
	}
	if err := Strict(data, &env); err != nil {
		return err
	}
	if env.Version != ProtocolVersion || env.RequestID != id {
		return fmt.Errorf("answer of version %d to request %d, want %d: %w", env.Version, env.RequestID, id, ErrBadAnswer)
	}
	c.Raw = env.Body.Value
	if env.Body.Result == "error" {
		var e Error
		if err := Strict(env.Body.Value, &e); err != nil {
			return err
		}
		return &e
	}
	if env.Body.Result != result {
		return fmt.Errorf("answer %q, want %q: %w", env.Body.Result, result, ErrBadAnswer)
	}
	if out == nil {
		return nil
	}
	return Strict(env.Body.Value, out)
}

// Strict decodes data into out, refusing unknown fields.
func Strict(data []byte, out any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(out); err != nil {
		return fmt.Errorf("%v: %w", err, ErrBadAnswer)
	}
	return nil
}

// Closed reports whether the authority ended the session: a read finds
// the end of the stream, or a reset of it when the authority closed with
// bytes of ours unread, with no answer before it.
func (c *Client) Closed() bool {
	if err := c.conn.SetReadDeadline(time.Now().Add(Within)); err != nil {
		return false
	}
	var b [1]byte
	n, err := c.conn.Read(b[:])
	return n == 0 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET))
}
