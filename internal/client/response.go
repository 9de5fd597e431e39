package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/textproto"
	"strconv"
	"strings"
)

// Bounds on an answer's framing.
const (
	// maxHeaderBytes bounds the status line and headers: marshald's are
	// a few hundred bytes.
	maxHeaderBytes = 64 << 10
	// readBufferSize is the read buffer's size, which also bounds a
	// chunk's size line, as in net/http.
	readBufferSize = 4096
	// maxChunkOverhead bounds what chunk extensions may add beyond 16
	// bytes per chunk and twice its data, as in net/http.
	maxChunkOverhead = 16 << 10
)

// Response is an answer from marshald.
type Response struct {
	// StatusCode is the status, e.g. 404.
	StatusCode int
	// Status is the status with its reason, e.g. "404 Not Found".
	Status string
	// ContentLength is the length the answer declared; -1 when it did
	// not (a chunked body, or one that ends with the connection).
	ContentLength int64
	// Body reads the body up to its end (io.EOF). A body cut short
	// fails with io.ErrUnexpectedEOF, a malformed chunk with an error
	// wrapping ErrBadResponse.
	Body io.Reader
}

// readResponse reads an answer's status line and headers from r, and
// returns it with a body that reads the rest of r. It reads as
// net/http's ReadResponse does for a GET, a little more strictly:
// HTTP/1.0 or 1.1 only, no informational (1xx) answer, no trailer, and
// headers bounded by maxHeaderBytes.
func readResponse(r io.Reader) (*Response, error) {
	// The limit leaves room for the body's first bytes, read ahead.
	limit := &headerLimit{r: r, max: maxHeaderBytes + readBufferSize}
	br := bufio.NewReaderSize(limit, readBufferSize)
	tp := textproto.NewReader(br)
	line, err := tp.ReadLine()
	if err != nil {
		return nil, fmt.Errorf("reading the status line: %w", unexpectedEOF(err))
	}
	resp := &Response{ContentLength: -1}
	proto, status, ok := strings.Cut(line, " ")
	resp.Status = strings.TrimLeft(status, " ")
	code, _, _ := strings.Cut(resp.Status, " ")
	if len(code) == 3 {
		resp.StatusCode, err = strconv.Atoi(code)
	}
	switch {
	case !ok || proto != "HTTP/1.1" && proto != "HTTP/1.0":
		return nil, fmt.Errorf("%w: status line %q", ErrBadResponse, line)
	case len(code) != 3 || err != nil || resp.StatusCode < 0:
		return nil, fmt.Errorf("%w: status code %q", ErrBadResponse, code)
	case resp.StatusCode < 200:
		return nil, fmt.Errorf("%w: an informational answer %q, not asked for", ErrBadResponse, resp.Status)
	}
	hdr, err := tp.ReadMIMEHeader()
	if err != nil {
		var pe textproto.ProtocolError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%w: %v", ErrBadResponse, err)
		}
		return nil, fmt.Errorf("reading the headers: %w", unexpectedEOF(err))
	}
	// What is buffered is the body's.
	if limit.read-int64(br.Buffered()) > maxHeaderBytes {
		return nil, errHeaderTooLarge
	}
	limit.max = -1

	// Framing, as RFC 9112 section 6 and net/http have it: chunked
	// (HTTP/1.1 only) overrides a length, which equal duplicates may
	// repeat; without either, the body ends with the connection.
	chunked := false
	if te, ok := hdr["Transfer-Encoding"]; ok && proto == "HTTP/1.1" {
		if len(te) != 1 || !isChunked(te[0]) {
			return nil, fmt.Errorf("%w: transfer encoding %q, want chunked", ErrBadResponse, te)
		}
		chunked = true
	}
	if lengths := hdr["Content-Length"]; len(lengths) > 0 {
		first := textproto.TrimString(lengths[0])
		for _, l := range lengths[1:] {
			if textproto.TrimString(l) != first {
				return nil, fmt.Errorf("%w: Content-Length %q", ErrBadResponse, lengths)
			}
		}
		n, err := strconv.ParseUint(first, 10, 63)
		if err != nil {
			return nil, fmt.Errorf("%w: Content-Length %q", ErrBadResponse, first)
		}
		resp.ContentLength = int64(n)
	}
	switch {
	case resp.StatusCode == 204 || resp.StatusCode == 304:
		resp.ContentLength = 0
		resp.Body = &lengthBody{r: br}
	case chunked:
		resp.ContentLength = -1
		resp.Body = &chunkedReader{r: br}
	case resp.ContentLength >= 0:
		resp.Body = &lengthBody{r: br, n: resp.ContentLength}
	default:
		resp.Body = br
	}
	return resp, nil
}

var errHeaderTooLarge = fmt.Errorf("%w: the status line and headers exceed %d bytes", ErrBadResponse, maxHeaderBytes)

// headerLimit fails reads past max bytes, while the headers are read.
type headerLimit struct {
	r io.Reader
	// max is what may be read; < 0 once the headers are read.
	max  int64
	read int64
}

func (l *headerLimit) Read(p []byte) (int, error) {
	if l.max >= 0 {
		if l.read >= l.max {
			return 0, errHeaderTooLarge
		}
		p = p[:min(int64(len(p)), l.max-l.read)]
	}
	n, err := l.r.Read(p)
	l.read += int64(n)
	return n, err
}

// isChunked compares as net/http does: ASCII letters in any case.
func isChunked(te string) bool {
	const want = "chunked"
	if len(te) != len(want) {
		return false
	}
	for i := range len(te) {
		c := te[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != want[i] {
			return false
		}
	}
	return true
}

// unexpectedEOF is err, with io.EOF made io.ErrUnexpectedEOF: the answer
// ended before its end.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// lengthBody reads a body of n bytes.
type lengthBody struct {
	r *bufio.Reader
	n int64
}

func (b *lengthBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), b.n)]
	n, err := b.r.Read(p)
	b.n -= int64(n)
	return n, unexpectedEOF(err)
}

// chunkedReader reads a chunked body (RFC 9112 section 7.1), the way
// net/http does: chunk extensions are skipped, bounded in size, lines end
// in CRLF. It returns what a chunk holds without waiting for the next,
// so that a stream's lines arrive as they are flushed.
type chunkedReader struct {
	r *bufio.Reader
	// n is what is left of the current chunk's data.
	n uint64
	// crlf: the CRLF after a chunk's data is still to be read.
	crlf   bool
	excess int64
	err    error
}

func (cr *chunkedReader) Read(p []byte) (int, error) {
	if cr.err != nil {
		return 0, cr.err
	}
	if cr.crlf {
		if cr.err = cr.readCRLF(); cr.err != nil {
			return 0, cr.err
		}
		cr.crlf = false
	}
	if cr.n == 0 {
		if cr.err = cr.beginChunk(); cr.err != nil {
			return 0, cr.err
		}
	}
	if len(p) == 0 {
		return 0, nil
	}
	if uint64(len(p)) > cr.n {
		p = p[:cr.n]
	}
	n, err := cr.r.Read(p)
	cr.n -= uint64(n)
	switch {
	case err != nil:
		cr.err = unexpectedEOF(err)
	case cr.n == 0:
		cr.crlf = true
	}
	return n, cr.err
}

func (cr *chunkedReader) readCRLF() error {
	var b [2]byte
	if _, err := io.ReadFull(cr.r, b[:]); err != nil {
		return unexpectedEOF(err)
	}
	if string(b[:]) != "\r\n" {
		return fmt.Errorf("%w: chunk data not followed by CRLF", ErrBadResponse)
	}
	return nil
}

// beginChunk reads a chunk's size line; after the last chunk, it
// returns io.EOF.
func (cr *chunkedReader) beginChunk() error {
	line, err := cr.r.ReadSlice('\n')
	switch {
	case err == bufio.ErrBufferFull:
		return fmt.Errorf("%w: chunk size line over %d bytes", ErrBadResponse, readBufferSize)
	case err != nil:
		return unexpectedEOF(err)
	}
	// RFC 9112 errata 7633: a bare LF does not end a chunk's line.
	if i := bytes.IndexByte(line, '\r'); i < 0 || i != len(line)-2 {
		return fmt.Errorf("%w: chunk size line %q does not end in CRLF alone", ErrBadResponse, line)
	}
	cr.excess += int64(len(line))
	line = bytes.TrimRight(line[:len(line)-2], " \t")
	line, _, _ = bytes.Cut(line, []byte(";"))
	n, err := parseChunkSize(line)
	if err != nil {
		return err
	}
	if n == 0 {
		return cr.endBody()
	}
	// One byte a chunk is fine; long extensions on small chunks are not.
	cr.excess = max(cr.excess-16-2*int64(min(n, 1<<61)), 0)
	if cr.excess > maxChunkOverhead {
		return fmt.Errorf("%w: chunk extensions over %d bytes", ErrBadResponse, maxChunkOverhead)
	}
	cr.n = n
	return nil
}

// endBody reads what follows the last chunk: the empty line that ends
// the body, as marshald sends no trailer.
func (cr *chunkedReader) endBody() error {
	b, err := cr.r.Peek(2)
	switch {
	case string(b) == "\r\n":
		cr.r.Discard(2)
		return io.EOF
	case len(b) == 2:
		return errTrailer
	}
	return unexpectedEOF(err)
}

var errTrailer = fmt.Errorf("%w: a trailer after the last chunk", ErrBadResponse)

// parseChunkSize parses a chunk's size: hexadecimal, at most 16 digits.
func parseChunkSize(s []byte) (uint64, error) {
	if len(s) == 0 || len(s) > 16 {
		return 0, fmt.Errorf("%w: chunk size %q", ErrBadResponse, s)
	}
	var n uint64
	for _, c := range s {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, fmt.Errorf("%w: chunk size %q", ErrBadResponse, s)
		}
		n = n<<4 | uint64(c)
	}
	return n, nil
}
