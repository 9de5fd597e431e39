// Package state is marshald's durable memory apart from the admission
// journal: the last good objects of every manifest file, the generation
// of every declared object and the recent events. It is one bbolt file in
// the state directory, so a restart resumes with nothing lost.
//
// State is created on first use. A file that is not a state database, or
// one written by an unknown schema, is refused rather than overwritten:
// it may hold the last good version of a manifest that no longer loads.
package state
