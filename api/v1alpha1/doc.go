// Package v1alpha1 holds marshal's declarative API, group marshal.dev,
// version v1alpha1: Profile, Workspace and Host, their defaults and their
// validation.
//
// The types are shaped like Kubernetes custom resources: an envelope of
// apiVersion, kind and metadata, a spec that people write and a status that
// only marshald writes. Spec keys are snake_case, matching the resource
// registry (cpu_milli, memory_bytes). The doc comment on every field is the
// manifest reference: it states what the field means, its default and its
// bounds.
//
// This package does not read files; strict decoding of manifests with
// file, line and field path in every error lives in package loader.
package v1alpha1
