package main

import (
	"encoding/json"
	"math"
	"net/netip"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// TestSchemaAgreesWithTheLoader draws documents, valid and not, and
// checks that both schemas accept exactly those the loader accepts.
// Documents are written as JSON, which the loader reads too, so that
// YAML 1.1 and 1.2 reading a scalar differently (yes, 0o17) plays no part.
//
// The draws stay clear of what the schema cannot tell, documented at the
// rules: a duration beyond int64 nanoseconds or a positive fraction of a
// nanosecond, a CIDR with bits set beyond its prefix length, a float
// with an integral value (1.0), which JSON Schema counts as an integer,
// and a Consumer's control reservation that does not suit its role.
func TestSchemaAgreesWithTheLoader(t *testing.T) {
	s := compileSchemas(t)
	rapid.Check(t, func(t *rapid.T) {
		d := &drawer{t: t, badPercent: rapid.SampledFrom([]int{0, 0, 1, 3, 10}).Draw(t, "bad_percent")}
		doc := d.document()
		data, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		lf := loader.LoadBytes("doc.json", data)
		loaderOK := len(lf.Errors) == 0
		kind, _ := doc["kind"].(string)
		kindErr, combinedErr := s.validate(t, document{json: data, kind: kind})
		if (combinedErr == nil) != loaderOK {
			t.Fatalf("loader accepts: %v (%v)\ncombined schema: %v\n%s", loaderOK, lf.Errors, combinedErr, data)
		}
		if s.byKind[kind] != nil && (kindErr == nil) != loaderOK {
			t.Fatalf("loader accepts: %v (%v)\n%s schema: %v\n%s", loaderOK, lf.Errors, kind, kindErr, data)
		}
		if d.badPercent == 0 && !loaderOK {
			t.Fatalf("a document drawn valid is refused by the loader: %v\n%s", lf.Errors, data)
		}
	})
}

// drawer draws documents field by field: each optional field absent,
// null or valid, and any field invalid with a chance of badPercent.
type drawer struct {
	t          *rapid.T
	badPercent int
}

// bad reports whether to draw something invalid now.
func (d *drawer) bad(t *rapid.T, label string) bool {
	return d.badPercent > 0 && rapid.IntRange(0, 99).Draw(t, label) < d.badPercent
}

type gen = *rapid.Generator[any]

func anyOf[T any](g *rapid.Generator[T]) gen {
	return rapid.Map(g, func(v T) any { return v })
}

func just(vs ...any) gen { return rapid.SampledFrom(vs) }

// field sets m[key] to a draw: an optional field is absent or null now
// and then; a required one only when it is drawn invalid.
func (d *drawer) field(m map[string]any, key string, required bool, valid, bad gen) {
	d.value(m, key, required, func() any { return valid.Draw(d.t, key) }, bad)
}

// object draws an optional nested object with build, or a wrong type.
func (d *drawer) object(m map[string]any, key string, required bool, build func() map[string]any) {
	d.value(m, key, required, func() any { return build() }, wrongType)
}

func (d *drawer) value(m map[string]any, key string, required bool, valid func() any, bad gen) {
	if d.bad(d.t, key+"_bad") {
		switch rapid.IntRange(0, 3).Draw(d.t, key+"_bad_how") {
		case 0:
			if required {
				return // absent
			}
		case 1:
			if required {
				m[key] = nil
				return
			}
		}
		m[key] = bad.Draw(d.t, key+"_bad_value")
		return
	}
	switch rapid.IntRange(0, 9).Draw(d.t, key+"_how") {
	case 0, 1:
		if !required {
			return
		}
	case 2:
		if !required {
			m[key] = nil
			return
		}
	}
	m[key] = valid()
}

// extra adds, now and then, a key the type does not have.
func (d *drawer) extra(m map[string]any, key string) {
	if d.bad(d.t, "extra_"+key) {
		m[key] = "x"
	}
}

var (
	wrongType = just(5, true, "x", 1.5, []any{"a"}, map[string]any{"a": "b"})

	validName = rapid.OneOf(
		anyOf(rapid.StringMatching(`[a-z0-9]([-a-z0-9]{0,12}[a-z0-9])?`)),
		just("a", strings.Repeat("a", 63), "ci-bot", "0"))
	badName = rapid.OneOf(
		anyOf(rapid.StringOfN(rapid.RuneFrom([]rune("az09-_.A é")), 0, 66, -1)),
		just("", "-a", "a-", "Coder", strings.Repeat("a", 64), 5))

	validQuantity = rapid.OneOf(anyOf(rapid.Int64Range(1, math.MaxInt64)), just(int64(1), int64(math.MaxInt64)))
	badQuantity   = just(0, -1, int64(math.MinInt64), json.Number("9223372036854775808"), "5", 1.5, true)

	validRoot = just("/", "/srv/webapp", "/tmp", "/a b/c", "/x/../y", "//double")
	badRoot   = just("", "relative", "./x", "~/src", "/a\x00b", 5, []any{"/"})

	validArg = just("sh", "/bin/true", "true", "a b", "é")
	badArg   = just("", "a\x00b", nil, 5, false)

	validEnvName = just("CI", "NODE_ENV", "a.b-c", "é", "1X")
	badEnvName   = just("", "A=B", "=", "A\x00")
	validEnvVal  = just("1", "", "with space", "é", nil)
	badEnvVal    = just("x\x00y", 5, true, []any{})

	validLabelKey = rapid.OneOf(
		anyOf(rapid.StringMatching(`([a-z0-9]([-a-z0-9]{0,6}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,6}[a-z0-9])?)?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?`)),
		just(strings.Repeat("a", 253)+"/x", "app.kubernetes.io/name", strings.Repeat("n", 63)))
	badLabelKey = just("", "-a", "a/", "/a", "a/b/c", "A.B/c", strings.Repeat("a", 254)+"/x", strings.Repeat("n", 64), "a b")
	validLabel  = rapid.OneOf(
		anyOf(rapid.StringMatching(`([A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?)?`)),
		just(strings.Repeat("v", 63), nil, ""))
	badLabel = just("-a", "a b", strings.Repeat("v", 64), 5, true)

	validHost = rapid.OneOf(
		anyOf(rapid.StringMatching(`(\*\.)?([a-z0-9]([-a-z0-9]{0,4}[a-z0-9])?\.){0,3}[a-z]([-a-z0-9]{0,4}[a-z0-9])?`)),
		just("*", "github.com", "*.github.com", "localhost", "a", "x--y.example", "0.a1",
			strings.Repeat("a", 63)+".com", strings.Repeat("a.", 126)+"a"))
	badHost = just("", "*.", "GitHub.com", "git*.com", "github.com.", "10.0.0.1", "*.10.0.0.1", "*.*.example.com", "host.123",
		"-a.com", "a-.com", "a..b", ".a", strings.Repeat("a", 64)+".com", strings.Repeat("a.", 127)+"a", "[::1]", "::1",
		"é.com", "a b", nil, 5)

	validCIDR = rapid.OneOf(
		anyOf(rapid.Custom(func(t *rapid.T) string {
			b := rapid.SliceOfN(rapid.Byte(), 4, 4).Draw(t, "ipv4")
			return netip.PrefixFrom(netip.AddrFrom4([4]byte(b)), rapid.IntRange(0, 32).Draw(t, "bits")).Masked().String()
		})),
		anyOf(rapid.Custom(func(t *rapid.T) string {
			b := rapid.SliceOfN(rapid.SampledFrom([]byte{0, 0, 0, 1, 0xfe, 0xff}), 16, 16).Draw(t, "ipv6")
			return netip.PrefixFrom(netip.AddrFrom16([16]byte(b)), rapid.IntRange(0, 128).Draw(t, "bits")).Masked().String()
		})),
		just("10.20.0.0/16", "0.0.0.0/0", "255.255.255.255/32", "::/0", "::1/128", "2001:db8::/32", "2001:DB8::/32",
			"fe80::/10", "1:2:3:4:5:6:7:8/128", "0001::/16", "1::/16", "::2:0/112"))
	badCIDR = just("", "banana", "10.0.0.0/33", "10.0.0.1", "010.0.0.0/8", "10.0.0.0/08", "10.0.0.0/-1", "::ffff:10.0.0.0/104",
		"1:2:3:4:5:6:1.2.3.4/128", "1:::/64", ":::/0", "1:2:3:4:5:6:7:8:9/128", "fe80::%eth0/64", "::/129", "00001::/16",
		"10.0.0.0 /8", nil, 10)

	validPort = rapid.OneOf(anyOf(rapid.Int64Range(1, 65535)), just(int64(1), int64(65535), int64(443)))
	badPort   = just(0, -1, 65536, int64(5000000000), "443", 1.5, nil, true)

	validDuration = just("5s", "1m30s", "+1h", "0.5s", ".5ms", "1.s", "0s1ns", "1µs", "2μs", "3us", "10ns", "0h0m1s")
	badDuration   = just("", "0", "0s", "-5s", "+0.0h", "5", "soon", "5 s", 5, map[string]any{"seconds": 5})
)

// enum draws one of values, or a wrong one.
func enum[T ~string](vs ...T) (valid, bad gen) {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return just(out...), just("Cgroup", "none ", "x", 1, false)
}

func (d *drawer) list(valid, bad gen) gen {
	return anyOf(rapid.Custom(func(t *rapid.T) []any {
		n := rapid.IntRange(0, 3).Draw(t, "len")
		out := make([]any, n)
		for i := range out {
			if d.bad(t, "bad_item") {
				out[i] = bad.Draw(t, "item")
			} else {
				out[i] = valid.Draw(t, "item")
			}
		}
		return out
	}))
}

func (d *drawer) mapOf(validKey, badKey, validVal, badVal gen) gen {
	return anyOf(rapid.Custom(func(t *rapid.T) map[string]any {
		n := rapid.IntRange(0, 3).Draw(t, "len")
		out := map[string]any{}
		for range n {
			k, v := validKey, validVal
			if d.bad(t, "bad_key") {
				k = badKey
			}
			if d.bad(t, "bad_value") {
				v = badVal
			}
			key, ok := k.Draw(t, "key").(string)
			if !ok {
				continue
			}
			out[key] = v.Draw(t, "value")
		}
		return out
	}))
}

func (d *drawer) document() map[string]any {
	m := map[string]any{}
	d.field(m, "apiVersion", true, just(v1alpha1.APIVersion), just("marshal.dev/v1", "v1", 1))
	d.field(m, "kind", true, anyOf(rapid.SampledFrom(v1alpha1.Kinds)), just("Agent", "profile", "List", 1))
	d.object(m, "metadata", true, d.metadata)
	kind, _ := m["kind"].(string)
	if v1alpha1.New(kind) == nil {
		kind = rapid.SampledFrom(v1alpha1.Kinds).Draw(d.t, "spec_of")
	}
	switch kind {
	case v1alpha1.KindProfile:
		d.object(m, "spec", false, d.profileSpec)
	case v1alpha1.KindWorkspace:
		d.object(m, "spec", true, d.workspaceSpec)
	case v1alpha1.KindHost:
		d.object(m, "spec", false, d.hostSpec)
	case v1alpha1.KindConsumer:
		d.object(m, "spec", true, d.consumerSpec)
	}
	if d.bad(d.t, "status") {
		m["status"] = just(nil, map[string]any{}, map[string]any{"observedGeneration": 1}).Draw(d.t, "status_value")
	}
	d.extra(m, "specs")
	return m
}

func (d *drawer) metadata() map[string]any {
	m := map[string]any{}
	d.field(m, "name", true, validName, badName)
	d.field(m, "labels", false, d.mapOf(validLabelKey, badLabelKey, validLabel, badLabel), wrongType)
	if d.bad(d.t, "read_only_meta") {
		m[rapid.SampledFrom([]string{"generation", "creationTimestamp"}).Draw(d.t, "read_only_key")] =
			just(3, "2024-01-01T00:00:00Z", nil).Draw(d.t, "read_only_value")
	}
	d.extra(m, "namespace")
	return m
}

func (d *drawer) quantities(keys ...string) func() map[string]any {
	return func() map[string]any {
		m := map[string]any{}
		for _, k := range keys {
			d.field(m, k, false, validQuantity, badQuantity)
		}
		d.extra(m, "cpu")
		return m
	}
}

func (d *drawer) profileSpec() map[string]any {
	m := map[string]any{}
	iv, ib := enum(v1alpha1.IsolationCgroup, v1alpha1.IsolationNetns, "")
	d.field(m, "isolation", false, iv, ib)
	d.object(m, "limits", false, d.quantities("cpu_milli", "memory_bytes", "tasks"))
	ov, ob := enum(v1alpha1.OrphansKeep, v1alpha1.OrphansStop)
	d.field(m, "orphans", false, ov, ob)
	d.object(m, "egress", false, d.egress)
	d.extra(m, "isolatoin")
	return m
}

func (d *drawer) egress() map[string]any {
	m := map[string]any{}
	dv, db := enum(v1alpha1.EgressDeny, v1alpha1.EgressAllow, "")
	d.field(m, "default", false, dv, db)
	rule := anyOf(rapid.Custom(func(t *rapid.T) map[string]any {
		r := map[string]any{}
		av, ab := enum(v1alpha1.EgressAllow, v1alpha1.EgressDeny)
		d.field(r, "action", true, av, ab)
		d.field(r, "hosts", false, d.list(validHost, badHost), wrongType)
		d.field(r, "cidrs", false, d.list(validCIDR, badCIDR), wrongType)
		d.field(r, "ports", false, d.list(validPort, badPort), wrongType)
		d.extra(r, "host")
		return r
	}))
	d.field(m, "rules", false, d.list(rule, wrongType), wrongType)
	d.extra(m, "rule")
	return m
}

func (d *drawer) workspaceSpec() map[string]any {
	m := map[string]any{}
	d.field(m, "root", true, validRoot, badRoot)
	d.field(m, "profile", true, validName, badName)
	d.object(m, "network", false, func() map[string]any {
		n := map[string]any{}
		v, b := enum(v1alpha1.NetworkOpen, "")
		d.field(n, "policy", false, v, b)
		return n
	})
	d.object(m, "exec", false, func() map[string]any {
		e := map[string]any{}
		d.field(e, "allow", false, just(true, false), just("true", 1, "yes"))
		d.field(e, "argv0", false, d.list(validArg, badArg), wrongType)
		d.field(e, "env", false, d.mapOf(validEnvName, badEnvName, validEnvVal, badEnvVal), wrongType)
		d.extra(e, "argv")
		return e
	})
	d.object(m, "processes", false, d.quantities("max_live"))
	d.object(m, "resources", false, func() map[string]any {
		r := map[string]any{}
		pv, pb := enum(v1alpha1.ParticipationRequired, v1alpha1.ParticipationOptional, v1alpha1.ParticipationNone)
		d.field(r, "participation", true, pv, pb)
		d.object(r, "request", false, func() map[string]any {
			q := d.quantities("cpu_milli", "memory_bytes", "tasks")()
			d.object(q, "minimum", false, func() map[string]any {
				l := map[string]any{}
				for _, k := range []string{"cpu", "memory", "pids"} {
					v, b := enum(append(v1alpha1.Levels, "")...)
					d.field(l, k, false, v, b)
				}
				return l
			})
			return q
		})
		return r
	})
	d.extra(m, "workdir")
	return m
}

func (d *drawer) hostSpec() map[string]any {
	m := map[string]any{}
	d.object(m, "capacity", false, d.quantities("cpu_milli", "memory_bytes", "tasks"))
	d.field(m, "prepared_ttl", false, validDuration, badDuration)
	d.object(m, "egress", false, func() map[string]any {
		e := map[string]any{}
		v, b := enum(v1alpha1.EgressDeny, v1alpha1.EgressAllow, "")
		d.field(e, "unscoped", false, v, b)
		d.extra(e, "address")
		return e
	})
	d.object(m, "devguard", false, func() map[string]any {
		g := map[string]any{}
		d.field(g, "admin_credential_sha256", false, rapid.OneOf(validDigest, just("")), badDigest)
		d.field(g, "policy_revision", false, rapid.OneOf(validIdentifier, just("")), badIdentifier)
		d.extra(g, "admin_secret")
		return g
	})
	d.extra(m, "ttl")
	return m
}

var (
	validIdentifier = rapid.OneOf(
		anyOf(rapid.StringMatching(`[-A-Za-z0-9_.:]{1,20}`)),
		just("g1", strings.Repeat("Z", 128), "a:b.c_d-e"))
	badIdentifier = just("a b", "a/b", strings.Repeat("z", 129), "é", 5, true)
	validDigest   = rapid.OneOf(anyOf(rapid.StringMatching(`[0-9a-f]{64}`)), just(strings.Repeat("0", 64)))
	badDigest     = just(strings.Repeat("A", 64), strings.Repeat("a", 63), strings.Repeat("g", 64), 5)
	validInstance = rapid.OneOf(anyOf(rapid.Int64Range(1, 64)), just(int64(1), int64(64)))
	badInstance   = just(0, 65, -1, "2", 1.5)
)

// consumerSpec draws a consumer whose control reservation suits its
// role: the role decides whether the reservation is required and
// positive or zero, which the schema cannot tell.
func (d *drawer) consumerSpec() map[string]any {
	m := map[string]any{}
	d.field(m, "consumer_id", false, rapid.OneOf(validIdentifier, just("")), badIdentifier)
	d.field(m, "generation", true, validIdentifier, rapid.OneOf(badIdentifier, just("")))
	d.field(m, "credential_sha256", true, validDigest, badDigest)
	d.field(m, "max_instances", true, validInstance, badInstance)
	role := rapid.SampledFrom([]v1alpha1.ConsumerRole{v1alpha1.RoleWorkload, v1alpha1.RoleControlService}).Draw(d.t, "role")
	m["role"] = string(role)
	if role == v1alpha1.RoleControlService {
		r := map[string]any{}
		for _, k := range []string{"cpu_milli", "memory_bytes", "tasks"} {
			r[k] = validQuantity.Draw(d.t, k)
		}
		m["control_reservation"] = r
	} else if rapid.Bool().Draw(d.t, "workload_reservation") {
		m["control_reservation"] = map[string]any{"cpu_milli": 0, "memory_bytes": 0, "tasks": 0}
	}
	d.extra(m, "secret")
	return m
}
