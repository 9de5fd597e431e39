package client

import (
	"context"
	"strconv"
)

// The client speaks HTTP/1.1 itself, one request per connection, rather
// than through net/http: linking net/http (and with it crypto/tls, x509
// and http2) made every marshalctl start 0.3 to 0.5 ms slower and its
// binary 11.2 MB instead of 6.3, and marshalctl run pays that before its
// agent starts.

// Conn is one connection to marshald, carrying one request and its
// answer: marshald checks the caller per connection. Its methods are
// not for concurrent use; the end of the context it was dialed with may
// come at any time.
type Conn struct {
	ctx  context.Context
	sock *unixSocket
	// stop unregisters the shutdown at the end of ctx; shutDone is
	// closed once that shutdown has run.
	stop     func() bool
	shutDone chan struct{}
	closed   bool
}

// Dial connects to marshald at socket. It fails with an
// *UnreachableError, or with ctx's error when ctx has ended. Until Close,
// the end of ctx shuts the connection down: a Write, ReadResponse or
// read of the body, blocked or to come, returns ctx's error, and
// marshald sees the caller go away.
func Dial(ctx context.Context, socket string) (*Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := dialUnix(socket)
	if err != nil {
		return nil, &UnreachableError{Socket: socket, Err: err}
	}
	c := &Conn{ctx: ctx, sock: s, shutDone: make(chan struct{})}
	c.stop = context.AfterFunc(ctx, func() {
		s.shutdown()
		close(c.shutDone)
	})
	return c, nil
}

// Write sends p, a request or part of one, as is. Requests must say
// "Connection: close".
func (c *Conn) Write(p []byte) (int, error) {
	n, err := c.sock.Write(p)
	if err != nil {
		err = c.ioError(err)
	}
	return n, err
}

// RoundTrip sends a request for target (path and query) with a JSON
// body, or none when body is nil, and reads its answer; call it once.
// marshald may answer a refused caller and close before it reads the
// whole request: an answer read counts even when the write failed.
func (c *Conn) RoundTrip(method, target string, body []byte) (*Response, error) {
	_, werr := c.Write(appendRequest(nil, method, target, body))
	resp, err := c.ReadResponse()
	if err != nil && werr != nil {
		err = werr
	}
	return resp, err
}

// ReadResponse reads the answer to the request written; call it once.
// Its status line and headers are read here, its body by the Response's
// Body. A malformed answer fails with an error wrapping ErrBadResponse;
// one cut short with io.ErrUnexpectedEOF.
func (c *Conn) ReadResponse() (*Response, error) {
	resp, err := readResponse(connReader{c})
	if err != nil {
		return nil, c.ioError(err)
	}
	return resp, nil
}

// Close closes the connection. After a shutdown by ctx's end it waits
// for that shutdown to finish, so that it never reaches a descriptor
// given back.
func (c *Conn) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	if !c.stop() {
		<-c.shutDone
	}
	return c.sock.close()
}

// ioError is err, or ctx's error once ctx has ended: the shutdown then,
// not marshald, ended the read or write.
func (c *Conn) ioError(err error) error {
	if ctxErr := c.ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return err
}

// connReader reads the connection for the response reader.
type connReader struct{ c *Conn }

func (r connReader) Read(p []byte) (int, error) {
	n, err := r.c.sock.Read(p)
	if err != nil {
		err = r.c.ioError(err)
	}
	return n, err
}

// appendRequest appends a request for target (path and query) with a
// JSON body, or none when body is nil.
func appendRequest(b []byte, method, target string, body []byte) []byte {
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, target...)
	b = append(b, " HTTP/1.1\r\nHost: marshald\r\nConnection: close\r\n"...)
	if body != nil {
		b = append(b, "Content-Type: application/json\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, body...)
}
