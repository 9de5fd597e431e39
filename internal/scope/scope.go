package scope

import (
	"crypto/rand"
	"encoding/hex"
	"strings"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

const (
	// RootSlice is the slice that holds every profile slice.
	RootSlice = "marshal.slice"

	prefix      = "marshal-"
	sliceSuffix = ".slice"
	scopeSuffix = ".scope"

	// IDLength is the number of hex digits in a launch ID.
	IDLength = 32
)

// Identity is what a scope name registers.
type Identity struct {
	// Profile is the profile name, unescaped.
	Profile string `json:"profile"`
	// ID is the launch's 32 lowercase hex digits.
	ID string `json:"id"`
	// Scope is the unit name, marshal-<esc(profile)>-<id>.scope.
	Scope string `json:"scope"`
	// Path is the cgroup path up to and including the scope.
	Path string `json:"path"`
}

// NewID returns a fresh launch ID: 32 lowercase hex digits from
// crypto/rand.
func NewID() string {
	var b [IDLength / 2]byte
	rand.Read(b[:]) // never returns an error; it crashes the program instead
	return hex.EncodeToString(b[:])
}

// ValidID reports whether id is 32 lowercase hex digits.
func ValidID(id string) bool {
	if len(id) != IDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// SliceName returns the unit name of profile's slice,
// marshal-<esc(profile)>.slice.
func SliceName(profile string) string {
	return prefix + Escape(profile) + sliceSuffix
}

// ScopeName returns the unit name of launch id of profile,
// marshal-<esc(profile)>-<id>.scope.
func ScopeName(profile, id string) string {
	return prefix + Escape(profile) + "-" + id + scopeSuffix
}

// Escape applies systemd unit-name escaping (as systemd-escape prints it)
// to s: ASCII letters, digits, ':' and '_' stay, as does '.' except in
// front; '/' becomes '-'; every other byte becomes \xNN.
func Escape(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '/':
			b.WriteByte('-')
		case c == '.' && i == 0, !plain(c):
			const hexdigits = "0123456789abcdef"
			b.WriteString(`\x`)
			b.WriteByte(hexdigits[c>>4])
			b.WriteByte(hexdigits[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func plain(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == ':' || c == '_' || c == '.'
}

// ParseScopeName returns the identity registered by a scope unit name, and
// false when name is not one ScopeName could have produced for a valid
// profile name and ID. Path is left empty.
func ParseScopeName(name string) (Identity, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return Identity{}, false
	}
	rest, ok = strings.CutSuffix(rest, scopeSuffix)
	if !ok || len(rest) < IDLength+2 || rest[len(rest)-IDLength-1] != '-' {
		return Identity{}, false
	}
	esc, id := rest[:len(rest)-IDLength-1], rest[len(rest)-IDLength:]
	if !ValidID(id) {
		return Identity{}, false
	}
	profile, ok := unescapeProfile(esc)
	if !ok {
		return Identity{}, false
	}
	return Identity{Profile: profile, ID: id, Scope: name}, true
}

// ParseSliceName returns the profile whose slice SliceName names name, and
// false when name is not one SliceName could have produced for a valid
// profile name.
func ParseSliceName(name string) (string, bool) {
	esc, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return "", false
	}
	if esc, ok = strings.CutSuffix(esc, sliceSuffix); !ok {
		return "", false
	}
	return unescapeProfile(esc)
}

// Parse returns the identity of the innermost component of cgroupPath that
// is a marshal scope name, with Path cut after that component. A process
// in a group the agent created inside its scope therefore resolves to the
// scope's identity. It returns false when no component is a scope name.
func Parse(cgroupPath string) (Identity, bool) {
	end := len(cgroupPath)
	for end > 0 {
		start := strings.LastIndexByte(cgroupPath[:end], '/') + 1
		if id, ok := ParseScopeName(cgroupPath[start:end]); ok {
			id.Path = cgroupPath[:end]
			return id, true
		}
		end = start - 1
	}
	return Identity{}, false
}

// unescapeProfile inverts Escape for profile names: it accepts only the
// canonical escaping of a valid profile name, so that every accepted name
// formats back to itself.
func unescapeProfile(esc string) (string, bool) {
	profile := strings.ReplaceAll(esc, `\x2d`, "-")
	if v1alpha1.ValidateName(profile) != nil || Escape(profile) != esc {
		return "", false
	}
	return profile, true
}
