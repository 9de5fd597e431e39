package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// Bounds on what is read from the daemon.
const (
	// maxErrorBody bounds the body of a failed request.
	maxErrorBody = 1 << 20
	// maxStreamLine bounds one line of a watch: one object with its
	// status.
	maxStreamLine = 16 << 20
)

// The methods of the local API.
const (
	methodGet  = "GET"
	methodPost = "POST"
)

// Client talks to one marshald. Its methods may be called concurrently.
type Client struct {
	socket string
}

// New returns a client of the daemon listening on socket. It connects on
// each request, as marshald checks the caller per connection, so it
// holds nothing open between them and needs no Close.
func New(socket string) *Client {
	return &Client{socket: socket}
}

// Socket returns the socket the client dials.
func (c *Client) Socket() string { return c.socket }

// Info describes the daemon.
func (c *Client) Info(ctx context.Context) (localapi.Info, error) {
	var info localapi.Info
	err := c.do(ctx, methodGet, localapi.InfoPath, nil, nil, &info)
	return info, err
}

// List returns every object of kind (any name localapi.ResourceFor knows),
// sorted by name, each as the daemon encoded it.
func (c *Client) List(ctx context.Context, kind string) ([]json.RawMessage, error) {
	return c.ListSelected(ctx, kind, "")
}

// ListSelected is List of the objects whose labels match selector, a
// label selector as kubectl's -l takes it ("team=platform,tier!=gold",
// "env in (dev,ci)"), which the daemon parses; "" selects every object.
// A selector that does not parse is a *localapi.Error with code
// BAD_REQUEST.
func (c *Client) ListSelected(ctx context.Context, kind, selector string) ([]json.RawMessage, error) {
	var list localapi.ObjectList
	if err := c.do(ctx, methodGet, objectsPath(kind, ""), selectorQuery(selector), nil, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

func selectorQuery(selector string) url.Values {
	if selector == "" {
		return nil
	}
	return url.Values{localapi.SelectorParam: {selector}}
}

// Get returns one object. A missing one is a *localapi.Error with code
// NOT_FOUND.
func (c *Client) Get(ctx context.Context, kind, name string) (json.RawMessage, error) {
	var obj json.RawMessage
	if err := c.do(ctx, methodGet, objectsPath(kind, name), nil, nil, &obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// Watch calls fn with every object of kind as ADDED, then with every
// change, until ctx ends (it then returns ctx's error), fn returns an
// error (returned as is), or the daemon ends the stream (ErrStreamEnded,
// or the *localapi.Error it ended with).
func (c *Client) Watch(ctx context.Context, kind string, fn func(localapi.WatchEvent) error) error {
	return c.WatchSelected(ctx, kind, "", nil, fn)
}

// WatchSelected is Watch of the objects that match selector, as
// ListSelected selects them: an object that stops matching is DELETED.
// When started is not nil it is called once, before any event, when the
// daemon has taken the list the watch starts from: every change after
// started was called is in the stream, so a caller that reads the state
// in started misses nothing between that read and the events. An error
// from started ends the watch and is returned.
func (c *Client) WatchSelected(ctx context.Context, kind, selector string, started func() error, fn func(localapi.WatchEvent) error) error {
	q := selectorQuery(selector)
	if q == nil {
		q = url.Values{}
	}
	q.Set(localapi.WatchParam, "1")
	return c.stream(ctx, objectsPath(kind, ""), q, started, func(line []byte) error {
		var ev localapi.WatchEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("reading the watch: %w", err)
		}
		if ev.Type == localapi.WatchError {
			e := &localapi.Error{}
			if err := json.Unmarshal(ev.Object, e); err != nil {
				return fmt.Errorf("reading the watch's error: %w", err)
			}
			return e
		}
		return fn(ev)
	})
}

// Events returns the events after seq after, oldest first: about obj
// when it is not zero, else every event.
func (c *Client) Events(ctx context.Context, obj v1alpha1.ObjectReference, after uint64) ([]v1alpha1.Event, error) {
	var list localapi.EventList
	if err := c.do(ctx, methodGet, localapi.EventsPath, eventsQuery(obj, after), nil, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// WatchEvents calls fn with the events after seq after (about obj, unless
// zero), then with every event recorded later, until ctx ends, fn
// returns an error or the daemon ends the stream, as Watch does. A
// repeated event comes again with a larger Seq and its new count.
func (c *Client) WatchEvents(ctx context.Context, obj v1alpha1.ObjectReference, after uint64, fn func(v1alpha1.Event) error) error {
	q := eventsQuery(obj, after)
	q.Set(localapi.WatchParam, "1")
	return c.stream(ctx, localapi.EventsPath, q, nil, func(line []byte) error {
		var ev v1alpha1.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("reading the event stream: %w", err)
		}
		return fn(ev)
	})
}

// Apply asks the daemon to declare the objects of the files in req.
func (c *Client) Apply(ctx context.Context, req localapi.ApplyRequest) (localapi.ApplyResult, error) {
	var res localapi.ApplyResult
	err := c.do(ctx, methodPost, localapi.ApplyPath, nil, &req, &res)
	return res, err
}

// Delete asks the daemon to stop declaring objects.
func (c *Client) Delete(ctx context.Context, req localapi.DeleteRequest) (localapi.DeleteResult, error) {
	var res localapi.DeleteResult
	err := c.do(ctx, methodPost, localapi.DeletePath, nil, &req, &res)
	return res, err
}

// ConfirmEmpty confirms that the daemon's emptied config dir is meant to
// be empty, releasing its hold.
func (c *Client) ConfirmEmpty(ctx context.Context) (localapi.ConfirmEmptyResult, error) {
	var res localapi.ConfirmEmptyResult
	err := c.do(ctx, methodPost, localapi.ConfirmEmptyPath, nil, struct{}{}, &res)
	return res, err
}

// Doctor reports what the host can enforce and what is missing.
func (c *Client) Doctor(ctx context.Context) (localapi.Doctor, error) {
	var d localapi.Doctor
	err := c.do(ctx, methodGet, localapi.DoctorPath, nil, nil, &d)
	return d, err
}

// Stop asks the daemon to end an agent (see localapi.StopRequest). A
// missing agent is a *localapi.Error with code NOT_FOUND.
func (c *Client) Stop(ctx context.Context, req localapi.StopRequest) (localapi.StopResult, error) {
	var res localapi.StopResult
	err := c.do(ctx, methodPost, localapi.StopPath, nil, &req, &res)
	return res, err
}

// Render applies the templates of req to its documents. A template that
// does not parse is a *localapi.Error with code BAD_REQUEST.
func (c *Client) Render(ctx context.Context, req localapi.RenderRequest) (localapi.RenderResult, error) {
	var res localapi.RenderResult
	err := c.do(ctx, methodPost, localapi.RenderPath, nil, &req, &res)
	return res, err
}

// objectsPath is the route of kind's objects, or of one of them. A kind
// the client does not know is sent as given, for the daemon to refuse.
func objectsPath(kind, name string) string {
	if r, ok := localapi.ResourceFor(kind); ok {
		kind = r.Plural
	}
	p := localapi.ObjectsPath + url.PathEscape(kind)
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	return p
}

func eventsQuery(obj v1alpha1.ObjectReference, after uint64) url.Values {
	q := url.Values{}
	if obj.Kind != "" {
		q.Set(localapi.KindParam, obj.Kind)
	}
	if obj.Name != "" {
		q.Set(localapi.NameParam, obj.Name)
	}
	if after > 0 {
		q.Set(localapi.AfterParam, strconv.FormatUint(after, 10))
	}
	return q
}

// request sends one request and hands a successful answer to read. The
// connection is closed when it returns.
func (c *Client) request(ctx context.Context, method, path string, q url.Values, body any, read func(*Response) error) error {
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return fmt.Errorf("encoding the request: %w", err)
		}
	}
	target := path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	conn, err := Dial(ctx, c.socket)
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := conn.RoundTrip(method, target, data)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return fmt.Errorf("%s %s: %w", method, path, err)
	case resp.StatusCode/100 != 2:
		return readError(resp)
	}
	return read(resp)
}

// do sends one request and decodes its answer into out.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any) error {
	return c.request(ctx, method, path, q, body, func(resp *Response) error {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("reading the answer to %s %s: %w", method, path, err)
		}
		return nil
	})
}

// stream sends a watch request, calls started (when not nil) once the
// daemon has answered, and then fn with each line of the answer.
func (c *Client) stream(ctx context.Context, path string, q url.Values, started func() error, fn func(line []byte) error) error {
	return c.request(ctx, methodGet, path, q, nil, func(resp *Response) error {
		if started != nil {
			if err := started(); err != nil {
				return err
			}
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), maxStreamLine)
		for sc.Scan() {
			line := sc.Bytes()
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			if err := fn(line); err != nil {
				return err
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("%w: %v", ErrStreamEnded, err)
		}
		return ErrStreamEnded
	})
}

// readError turns a failed response into a *localapi.Error.
func readError(resp *Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &localapi.Error{}
	if err := json.Unmarshal(data, e); err == nil && e.Code != "" {
		return e
	}
	msg := strings.TrimSpace(string(data))
	if msg == "" {
		msg = resp.Status
	}
	return &localapi.Error{Code: codeOf(resp.StatusCode), Message: msg}
}

// codeOf guesses the code of a failure whose body is not a localapi.Error.
func codeOf(status int) string {
	switch status {
	case 404: // Not Found
		return localapi.CodeNotFound
	case 403: // Forbidden
		return localapi.CodeForbidden
	case 409: // Conflict
		return localapi.CodeConflict
	case 503: // Service Unavailable
		return localapi.CodeUnavailable
	case 501: // Not Implemented
		return localapi.CodeNotSupported
	}
	if status/100 == 4 {
		return localapi.CodeBadRequest
	}
	return localapi.CodeInternal
}
