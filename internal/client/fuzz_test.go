package client

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// readOutcome is what a reader made of an answer.
type readOutcome struct {
	headErr, bodyErr error
	status           string
	code             int
	length           int64
	body             []byte
}

func readOurs(data []byte) readOutcome {
	resp, err := readResponse(bytes.NewReader(data))
	if err != nil {
		return readOutcome{headErr: err}
	}
	body, err := io.ReadAll(resp.Body)
	return readOutcome{status: resp.Status, code: resp.StatusCode, length: resp.ContentLength, body: body, bodyErr: err}
}

func readNetHTTP(data []byte) readOutcome {
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(data)), nil)
	if err != nil {
		return readOutcome{headErr: err}
	}
	body, err := io.ReadAll(resp.Body)
	return readOutcome{status: resp.Status, code: resp.StatusCode, length: resp.ContentLength, body: body, bodyErr: err}
}

// refusedOnPurpose reports whether an answer net/http reads is one this
// client refuses by design: not HTTP/1.0 or 1.1, informational, or with
// headers over maxHeaderBytes.
func refusedOnPurpose(data []byte, theirs readOutcome, ours error) bool {
	proto, _, _ := strings.Cut(string(data), " ")
	return proto != "HTTP/1.1" && proto != "HTTP/1.0" || theirs.code < 200 || errors.Is(ours, errHeaderTooLarge)
}

// The response reader reads what net/http's reads, chunked bodies above
// all: the same status, length and body, failing where it fails. It
// refuses, on purpose, a little more: see refusedOnPurpose, and a
// trailer.
func FuzzReadResponse(f *testing.F) {
	for _, seed := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{\"version\":\"v\"}",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\nline 0\n\r\n7\r\nline 1\n\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n1 \r\n,\r\n6\r\n world\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Sum: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\nContent-Length: 3\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nonly this",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
		"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 41\r\n\r\n{\"code\":\"NOT_FOUND\",\"message\":\"no route\"}\n",
		"HTTP/1.1 204 No Content\r\nContent-Length: 4\r\n\r\nbody",
		"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nuntil the end",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length:  5 \r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
		"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
		"HTTP/1.1  200  OK\nX: a\n folded\n\nrest",
		"HTTP/1.1 2000 OK\r\n\r\n",
		"SSH-2.0-OpenSSH_9.6\r\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ours, theirs := readOurs(data), readNetHTTP(data)
		switch {
		case ours.headErr != nil && theirs.headErr != nil:
			return
		case ours.headErr != nil:
			if !refusedOnPurpose(data, theirs, ours.headErr) {
				t.Fatalf("readResponse(%q) = %v; net/http reads it", data, ours.headErr)
			}
			return
		case theirs.headErr != nil:
			t.Fatalf("readResponse(%q) read it; net/http fails: %v", data, theirs.headErr)
		case ours.status != theirs.status || ours.code != theirs.code || ours.length != theirs.length:
			t.Fatalf("readResponse(%q) = %q (%d), length %d; net/http: %q (%d), length %d",
				data, ours.status, ours.code, ours.length, theirs.status, theirs.code, theirs.length)
		case ours.bodyErr == nil && theirs.bodyErr != nil:
			t.Fatalf("readResponse(%q) read the body %q; net/http fails: %v", data, ours.body, theirs.bodyErr)
		case ours.bodyErr != nil && theirs.bodyErr == nil && !errors.Is(ours.bodyErr, errTrailer):
			t.Fatalf("readResponse(%q) fails on the body: %v; net/http reads %q", data, ours.bodyErr, theirs.body)
		case ours.bodyErr == nil && !bytes.Equal(ours.body, theirs.body):
			t.Fatalf("readResponse(%q) read the body %q; net/http: %q", data, ours.body, theirs.body)
		}
	})
}
