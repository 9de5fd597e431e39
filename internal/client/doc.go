// Package client is the other end of marshald's local API: HTTP/JSON over
// the daemon's unix socket, with one method per route. Failed requests
// come back as *localapi.Error (use errors.As), and a daemon that cannot
// be reached as *UnreachableError, whose message says what to do.
// Package localapi says where the socket is (ResolveSocket). Dial gives
// the connection every request uses to a caller that writes its own
// request, as marshalctl run does, and reads the answer for it.
//
// It speaks HTTP/1.1 itself, one request per connection, without
// net/http (see conn.go for why). It is not a general HTTP client: no
// keep-alive, redirects, TLS, compression or trailers. It is not the CLI
// either: it prints nothing and decides no exit codes.
package client
