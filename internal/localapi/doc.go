// Package localapi is the wire contract of marshald's local API: the
// routes, the request and response bodies, the resource names and the
// error codes, shared by the server and the client, and where the socket
// is (DefaultSocket, ResolveSocket), so that marshald listens where
// marshalctl looks without either importing the other. It holds types,
// names and that one lookup; no behaviour.
//
// The API is HTTP/JSON on a unix socket. Callers are checked by
// SO_PEERCRED. Lists are JSON objects; watches stream one JSON value per
// line.
package localapi
