// Package quantity writes resource quantities for people: bytes in IEC
// units (256MiB, 1.5GiB), as marshalctl's tables and marshald's refusals
// both show them, so that a refusal reads in the units describe host
// prints. It parses nothing: manifests take plain integers.
package quantity
