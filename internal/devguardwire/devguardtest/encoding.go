package devguardtest

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// Fingerprint is the admission fingerprint of an admission, as the
// contract encodes it: the SHA-256, in lowercase hex, of serde_json's
// compact form of ["devguard-admission-v1", digest, intent], the intent's
// fields in their declared order. Every string of an intent the tests
// admit is plain ASCII, which serde_json writes as it is, escaping only
// '"' and '\'.
func Fingerprint(a Admission) string {
	in := a.Intent
	b := []byte(`["devguard-admission-v1",`)
	b = appendString(b, a.ExecutionDigest)
	b = append(b, `,{"profile":`...)
	b = appendString(b, in.Profile)
	b = append(b, `,"requested":{"cpu_milli":`...)
	b = strconv.AppendUint(b, in.Requested.CPUMilli, 10)
	b = append(b, `,"memory_bytes":`...)
	b = strconv.AppendUint(b, in.Requested.MemoryBytes, 10)
	b = append(b, `,"tasks":`...)
	b = strconv.AppendUint(b, in.Requested.Tasks, 10)
	b = append(b, `},"minimum":{"cpu":`...)
	b = appendString(b, in.Minimum.CPU)
	b = append(b, `,"memory":`...)
	b = appendString(b, in.Minimum.Memory)
	b = append(b, `,"pids":`...)
	b = appendString(b, in.Minimum.PIDs)
	b = append(b, "}}]"...)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}
