package clienthello

import (
	"encoding/binary"
	"fmt"
	"io"
)

const (
	recordHeaderLen      = 5
	recordTypeHandshake  = 22
	handshakeClientHello = 1
	// maxRecordLen is the largest TLSPlaintext fragment (RFC 8446 5.1).
	maxRecordLen = 1 << 14

	extServerName = 0
	nameTypeHost  = 0
)

// Hello is what Read learned of a ClientHello.
type Hello struct {
	// ServerName is the server_name extension's host name, as sent; ""
	// when there is none.
	ServerName string
	// HasServerName reports whether the extension was there.
	HasServerName bool
}

// Read reads a ClientHello from r, reading no more than max bytes, and
// returns it with every byte read. When the first bytes are not a TLS
// handshake record it returns ErrNotTLS and the bytes read (at most a
// record header). Other errors are ErrMalformed, ErrTooLarge (wrapped)
// and r's own, with the bytes read so far.
func Read(r io.Reader, max int) (Hello, []byte, error) {
	raw := make([]byte, 0, 2048)
	var msg []byte // the handshake message, reassembled from records
	need := -1     // its length with its header, once known
	for need < 0 || len(msg) < need {
		start := len(raw)
		if start+recordHeaderLen > max {
			return Hello{}, raw, ErrTooLarge
		}
		raw = append(raw, make([]byte, recordHeaderLen)...)
		from := start
		if start == 0 {
			// The first byte alone says whether this is TLS: a client
			// of another protocol that sends a byte and waits is not
			// kept waiting.
			n, err := io.ReadFull(r, raw[:1])
			if err != nil {
				return Hello{}, raw[:n], err
			}
			if raw[0] != recordTypeHandshake {
				return Hello{}, raw[:1], ErrNotTLS
			}
			from = 1
		}
		n, err := io.ReadFull(r, raw[from:])
		raw = raw[:from+n]
		if err != nil {
			return Hello{}, raw, err
		}
		h := raw[start:]
		switch {
		case start == 0 && h[1] != 3:
			return Hello{}, raw, ErrNotTLS
		case h[0] != recordTypeHandshake || h[1] != 3:
			// A record of another type before the ClientHello ended.
			return Hello{}, raw, fmt.Errorf("%w: record of type %d inside the ClientHello", ErrMalformed, h[0])
		}
		length := int(binary.BigEndian.Uint16(h[3:5]))
		if length == 0 || length > maxRecordLen {
			return Hello{}, raw, fmt.Errorf("%w: record of %d bytes", ErrMalformed, length)
		}
		if len(raw)+length > max {
			return Hello{}, raw, ErrTooLarge
		}
		body := len(raw)
		raw = append(raw, make([]byte, length)...)
		n, err = io.ReadFull(r, raw[body:])
		raw = raw[:body+n]
		if err != nil {
			return Hello{}, raw, err
		}
		if msg == nil {
			// The common case, one record: the message is read in place.
			// Its capacity ends with it, so that a second record's
			// append copies it rather than write into raw.
			msg = raw[body:len(raw):len(raw)]
		} else {
			msg = append(msg, raw[body:]...)
		}
		if need < 0 && len(msg) >= 4 {
			if msg[0] != handshakeClientHello {
				return Hello{}, raw, fmt.Errorf("%w: handshake message of type %d", ErrMalformed, msg[0])
			}
			need = 4 + (int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3]))
			if need > max {
				return Hello{}, raw, ErrTooLarge
			}
		}
	}
	if len(msg) != need {
		// Bytes of another handshake message share the last record:
		// a client sends nothing after its ClientHello before the
		// server answered.
		return Hello{}, raw, fmt.Errorf("%w: %d bytes after the ClientHello", ErrMalformed, len(msg)-need)
	}
	h, err := parse(msg[4:])
	return h, raw, err
}

// parse reads a ClientHello's body (RFC 8446 4.1.2).
func parse(b []byte) (Hello, error) {
	s := cursor(b)
	var sessionID, suites, compression, exts cursor
	if !s.skip(2+32) || !s.vector8(&sessionID) || len(sessionID) > 32 ||
		!s.vector16(&suites) || len(suites) == 0 || len(suites)%2 != 0 ||
		!s.vector8(&compression) || len(compression) == 0 {
		return Hello{}, fmt.Errorf("%w: truncated", ErrMalformed)
	}
	if len(s) == 0 {
		// No extensions (SSL 3.0 style): no server name.
		return Hello{}, nil
	}
	if !s.vector16(&exts) || len(s) != 0 {
		return Hello{}, fmt.Errorf("%w: extensions", ErrMalformed)
	}
	var h Hello
	for len(exts) > 0 {
		var typ uint16
		var data cursor
		if !exts.uint16(&typ) || !exts.vector16(&data) {
			return Hello{}, fmt.Errorf("%w: extension", ErrMalformed)
		}
		if typ != extServerName {
			continue
		}
		if h.HasServerName {
			return Hello{}, fmt.Errorf("%w: two server_name extensions", ErrMalformed)
		}
		h.HasServerName = true
		name, err := serverName(data)
		if err != nil {
			return Hello{}, err
		}
		h.ServerName = name
	}
	return h, nil
}

// serverName reads a server_name extension (RFC 6066 3): one host name.
func serverName(data cursor) (string, error) {
	var list cursor
	if !data.vector16(&list) || len(data) != 0 {
		return "", fmt.Errorf("%w: server_name", ErrMalformed)
	}
	if len(list) == 0 {
		// An empty list, as a server sends it back.
		return "", nil
	}
	var name string
	for len(list) > 0 {
		var typ uint8
		var v cursor
		if !list.uint8(&typ) || !list.vector16(&v) {
			return "", fmt.Errorf("%w: server_name entry", ErrMalformed)
		}
		if typ != nameTypeHost {
			continue
		}
		if name != "" || len(v) == 0 {
			return "", fmt.Errorf("%w: server_name with two host names, or an empty one", ErrMalformed)
		}
		name = string(v)
	}
	return name, nil
}

// cursor reads a byte string front to back; each method reports whether
// the bytes were there.
type cursor []byte

func (c *cursor) skip(n int) bool {
	if len(*c) < n {
		return false
	}
	*c = (*c)[n:]
	return true
}

func (c *cursor) uint8(v *uint8) bool {
	if len(*c) < 1 {
		return false
	}
	*v = (*c)[0]
	*c = (*c)[1:]
	return true
}

func (c *cursor) uint16(v *uint16) bool {
	if len(*c) < 2 {
		return false
	}
	*v = binary.BigEndian.Uint16(*c)
	*c = (*c)[2:]
	return true
}

func (c *cursor) vector8(v *cursor) bool {
	var n uint8
	if !c.uint8(&n) || len(*c) < int(n) {
		return false
	}
	*v, *c = (*c)[:n], (*c)[n:]
	return true
}

func (c *cursor) vector16(v *cursor) bool {
	var n uint16
	if !c.uint16(&n) || len(*c) < int(n) {
		return false
	}
	*v, *c = (*c)[:n], (*c)[n:]
	return true
}
