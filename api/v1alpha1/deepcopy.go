package v1alpha1

import (
	"maps"
	"slices"
)

// Deep copies, written by hand in the shape deepcopy-gen writes: each
// type that reaches shared memory (pointers, slices, maps) has
// DeepCopyInto, which copies every field and then replaces each reference
// with a copy of its own, and DeepCopy. TestDeepCopy fills every field of
// every type reachable from the kinds and their statuses, and fails when a
// copy shares memory with the original or differs from it: a field added
// without its line here is caught there.

// copyPtr returns a pointer to a copy of *p, nil for nil. T must hold no
// references of its own.
func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *ObjectMeta) DeepCopyInto(out *ObjectMeta) {
	*out = *in
	out.Labels = maps.Clone(in.Labels)
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *Profile) DeepCopyInto(out *Profile) {
	*out = *in
	in.Metadata.DeepCopyInto(&out.Metadata)
	in.Spec.DeepCopyInto(&out.Spec)
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of in that shares nothing with it.
func (in *Profile) DeepCopy() *Profile {
	if in == nil {
		return nil
	}
	out := new(Profile)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements Object.
func (in *Profile) DeepCopyObject() Object { return in.DeepCopy() }

// DeepCopyInto copies in into out, sharing nothing.
func (in *ProfileSpec) DeepCopyInto(out *ProfileSpec) {
	*out = *in
	if in.Limits != nil {
		out.Limits = new(Limits)
		in.Limits.DeepCopyInto(out.Limits)
	}
	if in.Egress != nil {
		out.Egress = new(EgressSpec)
		in.Egress.DeepCopyInto(out.Egress)
	}
	if in.Filesystem != nil {
		out.Filesystem = new(FilesystemSpec)
		in.Filesystem.DeepCopyInto(out.Filesystem)
	}
	if in.Control != nil {
		out.Control = new(ControlSpec)
		in.Control.DeepCopyInto(out.Control)
	}
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *FilesystemSpec) DeepCopyInto(out *FilesystemSpec) {
	*out = *in
	if in.Rules != nil {
		out.Rules = make([]FilesystemRule, len(in.Rules))
		for i := range in.Rules {
			out.Rules[i] = FilesystemRule{Access: in.Rules[i].Access, Paths: slices.Clone(in.Rules[i].Paths)}
		}
	}
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *ControlSpec) DeepCopyInto(out *ControlSpec) {
	*out = *in
	out.Run = slices.Clone(in.Run)
	out.Allow = slices.Clone(in.Allow)
	out.Consumers = slices.Clone(in.Consumers)
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *Limits) DeepCopyInto(out *Limits) {
	*out = *in
	out.CPUMilli = copyPtr(in.CPUMilli)
	out.MemoryBytes = copyPtr(in.MemoryBytes)
	out.Tasks = copyPtr(in.Tasks)
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *EgressSpec) DeepCopyInto(out *EgressSpec) {
	*out = *in
	if in.Rules != nil {
		out.Rules = make([]EgressRule, len(in.Rules))
		for i := range in.Rules {
			in.Rules[i].DeepCopyInto(&out.Rules[i])
		}
	}
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *EgressRule) DeepCopyInto(out *EgressRule) {
	*out = *in
	out.Hosts = slices.Clone(in.Hosts)
	out.CIDRs = slices.Clone(in.CIDRs)
	out.Ports = slices.Clone(in.Ports)
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *Workspace) DeepCopyInto(out *Workspace) {
	*out = *in
	in.Metadata.DeepCopyInto(&out.Metadata)
	in.Spec.DeepCopyInto(&out.Spec)
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of in that shares nothing with it.
func (in *Workspace) DeepCopy() *Workspace {
	if in == nil {
		return nil
	}
	out := new(Workspace)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements Object.
func (in *Workspace) DeepCopyObject() Object { return in.DeepCopy() }

// DeepCopyInto copies in into out, sharing nothing.
func (in *WorkspaceSpec) DeepCopyInto(out *WorkspaceSpec) {
	*out = *in
	in.Exec.DeepCopyInto(&out.Exec)
	out.Processes.MaxLive = copyPtr(in.Processes.MaxLive)
	if in.Resources != nil {
		out.Resources = new(ResourcesSpec)
		in.Resources.DeepCopyInto(out.Resources)
	}
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *ExecSpec) DeepCopyInto(out *ExecSpec) {
	*out = *in
	out.Allow = copyPtr(in.Allow)
	out.Argv0 = slices.Clone(in.Argv0)
	out.Env = maps.Clone(in.Env)
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *ResourcesSpec) DeepCopyInto(out *ResourcesSpec) {
	*out = *in
	if in.Request != nil {
		out.Request = new(ResourceRequest)
		in.Request.DeepCopyInto(out.Request)
	}
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *ResourceRequest) DeepCopyInto(out *ResourceRequest) {
	*out = *in
	out.CPUMilli = copyPtr(in.CPUMilli)
	out.MemoryBytes = copyPtr(in.MemoryBytes)
	out.Tasks = copyPtr(in.Tasks)
	out.Minimum = copyPtr(in.Minimum)
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *Host) DeepCopyInto(out *Host) {
	*out = *in
	in.Metadata.DeepCopyInto(&out.Metadata)
	in.Spec.DeepCopyInto(&out.Spec)
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of in that shares nothing with it.
func (in *Host) DeepCopy() *Host {
	if in == nil {
		return nil
	}
	out := new(Host)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements Object.
func (in *Host) DeepCopyObject() Object { return in.DeepCopy() }

// DeepCopyInto copies in into out, sharing nothing.
func (in *HostSpec) DeepCopyInto(out *HostSpec) {
	*out = *in
	if in.Capacity != nil {
		out.Capacity = new(Capacity)
		in.Capacity.DeepCopyInto(out.Capacity)
	}
	out.PreparedTTL = copyPtr(in.PreparedTTL)
	out.Egress = copyPtr(in.Egress)
	out.DevGuard = copyPtr(in.DevGuard)
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *Capacity) DeepCopyInto(out *Capacity) {
	*out = *in
	out.CPUMilli = copyPtr(in.CPUMilli)
	out.MemoryBytes = copyPtr(in.MemoryBytes)
	out.Tasks = copyPtr(in.Tasks)
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *Consumer) DeepCopyInto(out *Consumer) {
	*out = *in
	in.Metadata.DeepCopyInto(&out.Metadata)
	in.Spec.DeepCopyInto(&out.Spec)
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of in that shares nothing with it.
func (in *Consumer) DeepCopy() *Consumer {
	if in == nil {
		return nil
	}
	out := new(Consumer)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements Object.
func (in *Consumer) DeepCopyObject() Object { return in.DeepCopy() }

// DeepCopyInto copies in into out, sharing nothing.
func (in *ConsumerSpec) DeepCopyInto(out *ConsumerSpec) {
	*out = *in
	out.MaxInstances = copyPtr(in.MaxInstances)
	if in.ControlReservation != nil {
		out.ControlReservation = new(ControlReservation)
		in.ControlReservation.DeepCopyInto(out.ControlReservation)
	}
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *ControlReservation) DeepCopyInto(out *ControlReservation) {
	*out = *in
	out.CPUMilli = copyPtr(in.CPUMilli)
	out.MemoryBytes = copyPtr(in.MemoryBytes)
	out.Tasks = copyPtr(in.Tasks)
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *Status) DeepCopyInto(out *Status) {
	*out = *in
	out.Conditions = slices.Clone(in.Conditions)
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *ProfileStatus) DeepCopyInto(out *ProfileStatus) {
	*out = *in
	in.Status.DeepCopyInto(&out.Status)
	out.Limits = slices.Clone(in.Limits)
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *WorkspaceStatus) DeepCopyInto(out *WorkspaceStatus) {
	*out = *in
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *HostStatus) DeepCopyInto(out *HostStatus) {
	*out = *in
	in.Status.DeepCopyInto(&out.Status)
	out.Enforcement = slices.Clone(in.Enforcement)
	out.Admission = copyPtr(in.Admission)
	out.Workspaces = slices.Clone(in.Workspaces)
	if in.NotReady != nil {
		out.NotReady = make([]ObjectConditions, len(in.NotReady))
		for i, o := range in.NotReady {
			out.NotReady[i] = ObjectConditions{Kind: o.Kind, Name: o.Name, Conditions: slices.Clone(o.Conditions)}
		}
	}
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *ConsumerStatus) DeepCopyInto(out *ConsumerStatus) {
	*out = *in
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopyInto copies in into out, sharing nothing.
func (in *AgentStatus) DeepCopyInto(out *AgentStatus) {
	*out = *in
	in.Status.DeepCopyInto(&out.Status)
}
