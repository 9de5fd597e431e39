package devguardwire

import (
	"fmt"
	"slices"
	"strconv"
)

// DecodeRequest decodes one request frame as DevGuard's server does:
// strictly. Every field must be present unless it is optional (an
// Option in DevGuard's types), no field may be unknown or repeated, every
// method, capability and enumeration must be known, and a secret must be
// 64 lowercase hex digits. Anything else is ErrMalformed, whose message
// names the field but never repeats a value, so that a secret sent in
// the wrong place stays out of logs.
func DecodeRequest(frame []byte) (Request, error) {
	v, err := parseJSON(frame)
	if err != nil {
		return Request{}, err
	}
	var r Request
	d := decoder{}
	f := d.object(&v, "frame", "version", "request_id", "body")
	r.Version = d.u32(f["version"], "version")
	r.ID = d.u64(f["request_id"], "request_id")
	d.body(f["body"], &r)
	return r, d.err
}

// decoder collects the first error; every method is a no-op after it.
type decoder struct {
	err error
}

func (d *decoder) fail(path, format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%s: %s: %w", path, fmt.Sprintf(format, args...), ErrMalformed)
	}
}

// object returns v's fields by name when v is an object whose keys are
// among required and optional (the latter given after a "?" marker),
// every required one present; a field absent, or optional and null, is
// missing from the map.
func (d *decoder) object(v *value, path string, fields ...string) map[string]*value {
	if d.err != nil {
		return nil
	}
	if v == nil || v.kind != kindObject {
		d.fail(path, "must be an object, got %s", kindOf(v))
		return nil
	}
	out := make(map[string]*value, len(v.obj))
	optional := false
	known := make(map[string]bool, len(fields))
	required := make([]string, 0, len(fields))
	for _, f := range fields {
		if f == "?" {
			optional = true
			continue
		}
		known[f] = true
		if !optional {
			required = append(required, f)
		}
	}
	for i := range v.obj {
		m := &v.obj[i]
		if !known[m.key] {
			d.fail(path, "unknown field %q", m.key)
			return nil
		}
		if m.val.kind == kindNull && !slices.Contains(required, m.key) {
			continue
		}
		out[m.key] = &m.val
	}
	for _, f := range required {
		if out[f] == nil {
			d.fail(path, "missing field %q", f)
			return nil
		}
	}
	return out
}

func kindOf(v *value) string {
	if v == nil {
		return "nothing"
	}
	return v.kind.String()
}

func (d *decoder) str(v *value, path string) string {
	if d.err != nil {
		return ""
	}
	if v == nil || v.kind != kindString {
		d.fail(path, "must be a string, got %s", kindOf(v))
		return ""
	}
	return v.str
}

// uint reads a non-negative integer of at most bits bits, as serde
// reads u32 and u64: digits only, no fraction or exponent.
func (d *decoder) uint(v *value, path string, bits int) uint64 {
	if d.err != nil {
		return 0
	}
	if v == nil || v.kind != kindNumber {
		d.fail(path, "must be an integer, got %s", kindOf(v))
		return 0
	}
	n, err := strconv.ParseUint(v.num, 10, bits)
	if err != nil {
		d.fail(path, "must be an integer of %d bits", bits)
		return 0
	}
	return n
}

func (d *decoder) u32(v *value, path string) uint32 { return uint32(d.uint(v, path, 32)) }
func (d *decoder) u64(v *value, path string) uint64 { return d.uint(v, path, 64) }

// enum reads a string that is one of allowed.
func enum[T ~string](d *decoder, v *value, path string, allowed ...T) T {
	s := T(d.str(v, path))
	if d.err == nil && !slices.Contains(allowed, s) {
		d.fail(path, "unknown variant")
	}
	return s
}

func (d *decoder) secret(v *value, path string) Secret {
	s := d.str(v, path)
	if d.err != nil {
		return Secret{}
	}
	sec, ok := NewSecret(s)
	if !ok {
		d.fail(path, "must be 64 lowercase hex digits")
	}
	return sec
}

// body reads the adjacently tagged request: {"method": M, "params": P}.
func (d *decoder) body(v *value, r *Request) {
	f := d.object(v, "body", "method", "?", "params")
	r.Method = enum(d, f["method"], "body.method", MethodHello, MethodAuthenticate, MethodStatus, MethodRegister,
		MethodAdmit, MethodBeginLaunch, MethodLookup, MethodCancel, MethodAbandonLaunch, MethodObserve,
		MethodTerminate, MethodLaunch, MethodAdmitLease, MethodAdmitChild, MethodEndLease, MethodLeaseStatus)
	if d.err != nil {
		return
	}
	params := f["params"]
	const path = "body.params"
	if r.Method == MethodStatus {
		// A unit variant: no params, or null.
		if params != nil {
			d.fail(path, "status takes no params")
		}
		return
	}
	switch r.Method {
	case MethodHello:
		p := d.object(params, path, "compatibility")
		r.Compatibility = d.compatibility(p["compatibility"], path+".compatibility")
	case MethodAuthenticate:
		p := d.object(params, path, "credential")
		r.Credential = d.credential(p["credential"], path+".credential")
	case MethodRegister:
		p := d.object(params, path, "instance_id")
		r.InstanceID = d.str(p["instance_id"], path+".instance_id")
	case MethodAdmit:
		p := d.object(params, path, "request")
		r.Admission = d.admission(p["request"], path+".request")
	case MethodBeginLaunch, MethodLookup, MethodCancel, MethodObserve, MethodEndLease:
		p := d.object(params, path, "key")
		r.Key = d.key(p["key"], path+".key")
	case MethodAbandonLaunch:
		p := d.object(params, path, "key", "reason")
		r.Key = d.key(p["key"], path+".key")
		r.Reason = enum(d, p["reason"], path+".reason", AbandonSpawnFailed, AbandonHelperExited, AbandonGrantNotReceived)
	case MethodTerminate:
		p := d.object(params, path, "key", "signal")
		r.Key = d.key(p["key"], path+".key")
		r.Signal = enum(d, p["signal"], path+".signal", SignalInterrupt, SignalHangup, SignalTerminate, SignalKill)
	case MethodLaunch:
		p := d.object(params, path, "key", "instance_id", "permit")
		r.Key = d.key(p["key"], path+".key")
		r.InstanceID = d.str(p["instance_id"], path+".instance_id")
		r.Permit = d.secret(p["permit"], path+".permit")
	case MethodAdmitLease:
		p := d.object(params, path, "key", "budget", "?", "ttl_ms")
		r.Key = d.key(p["key"], path+".key")
		r.Budget = d.budget(p["budget"], path+".budget")
		if t := p["ttl_ms"]; t != nil {
			ttl := d.u64(t, path+".ttl_ms")
			r.TTLMS = &ttl
		}
	case MethodAdmitChild:
		p := d.object(params, path, "lease", "token", "request")
		r.Key = d.key(p["lease"], path+".lease")
		r.Token = d.secret(p["token"], path+".token")
		r.Admission = d.admission(p["request"], path+".request")
	case MethodLeaseStatus:
		p := d.object(params, path, "key", "token")
		r.Key = d.key(p["key"], path+".key")
		r.Token = d.secret(p["token"], path+".token")
	}
}

func (d *decoder) compatibility(v *value, path string) Compatibility {
	f := d.object(v, path, "minimum_protocol", "maximum_protocol", "required")
	c := Compatibility{
		MinimumProtocol: d.u32(f["minimum_protocol"], path+".minimum_protocol"),
		MaximumProtocol: d.u32(f["maximum_protocol"], path+".maximum_protocol"),
	}
	req := f["required"]
	if d.err != nil {
		return c
	}
	if req.kind != kindArray {
		d.fail(path+".required", "must be an array, got %s", req.kind)
		return c
	}
	for i := range req.arr {
		capability := enum(d, &req.arr[i], fmt.Sprintf("%s.required[%d]", path, i), capabilities...)
		if d.err == nil && !slices.Contains(c.Required, capability) {
			c.Required = append(c.Required, capability)
		}
	}
	slices.Sort(c.Required)
	return c
}

// credential reads the internally tagged credential: {"kind": K, …}.
func (d *decoder) credential(v *value, path string) Credential {
	if d.err != nil {
		return Credential{}
	}
	if v == nil || v.kind != kindObject {
		d.fail(path, "must be an object, got %s", kindOf(v))
		return Credential{}
	}
	var kindVal *value
	for i := range v.obj {
		if v.obj[i].key == "kind" {
			kindVal = &v.obj[i].val
		}
	}
	if kindVal == nil {
		d.fail(path, "missing field %q", "kind")
		return Credential{}
	}
	c := Credential{Kind: enum(d, kindVal, path+".kind", CredentialConsumer, CredentialAdministrator)}
	switch c.Kind {
	case CredentialConsumer:
		f := d.object(v, path, "kind", "consumer_id", "generation", "secret")
		c.ConsumerID = d.str(f["consumer_id"], path+".consumer_id")
		c.Generation = d.str(f["generation"], path+".generation")
		c.Secret = d.secret(f["secret"], path+".secret")
	case CredentialAdministrator:
		f := d.object(v, path, "kind", "secret")
		c.Secret = d.secret(f["secret"], path+".secret")
	}
	return c
}

func (d *decoder) key(v *value, path string) Key {
	f := d.object(v, path, "consumer_id", "consumer_generation", "attempt_id")
	return Key{
		ConsumerID:         d.str(f["consumer_id"], path+".consumer_id"),
		ConsumerGeneration: d.str(f["consumer_generation"], path+".consumer_generation"),
		AttemptID:          d.str(f["attempt_id"], path+".attempt_id"),
	}
}

func (d *decoder) budget(v *value, path string) Budget {
	f := d.object(v, path, "cpu_milli", "memory_bytes", "tasks")
	return Budget{
		CPUMilli:    d.u64(f["cpu_milli"], path+".cpu_milli"),
		MemoryBytes: d.u64(f["memory_bytes"], path+".memory_bytes"),
		Tasks:       d.u64(f["tasks"], path+".tasks"),
	}
}

func (d *decoder) admission(v *value, path string) Admission {
	f := d.object(v, path, "key", "execution_digest", "intent")
	a := Admission{
		Key:             d.key(f["key"], path+".key"),
		ExecutionDigest: d.str(f["execution_digest"], path+".execution_digest"),
	}
	ip := path + ".intent"
	in := d.object(f["intent"], ip, "profile", "requested", "minimum")
	a.Intent.Profile = d.str(in["profile"], ip+".profile")
	a.Intent.Requested = d.budget(in["requested"], ip+".requested")
	mp := ip + ".minimum"
	m := d.object(in["minimum"], mp, "cpu", "memory", "pids")
	levels := []Level{LevelAccounted, LevelCooperative, LevelKernel}
	a.Intent.Minimum = Levels{
		CPU:    enum(d, m["cpu"], mp+".cpu", levels...),
		Memory: enum(d, m["memory"], mp+".memory", levels...),
		PIDs:   enum(d, m["pids"], mp+".pids", levels...),
	}
	return a
}
