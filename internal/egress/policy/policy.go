package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// Reason says what decided a connection. Its values are enumerations,
// written as they are in the audit log and in events.
type Reason string

const (
	// ReasonRule is a rule that matched; Decision.Rule is its index.
	ReasonRule Reason = "rule"
	// ReasonDefault is the policy's default: no rule matched.
	ReasonDefault Reason = "default"
	// ReasonPrivate is a private address that no rule named, however
	// the rules and the default would have decided it otherwise.
	ReasonPrivate Reason = "private_range"
	// ReasonHostAddress is an address of this host's own interfaces
	// (not in a private range) that no rule named.
	ReasonHostAddress Reason = "host_address"
)

// Decision is what a policy says about one destination.
type Decision struct {
	// Allow reports whether the connection may be made.
	Allow bool
	// Rule is the index of the rule that decided, -1 when none did.
	Rule int
	// Reason says what decided.
	Reason Reason
}

// Policy is a compiled egress policy. It is immutable and safe for
// concurrent use.
type Policy struct {
	allowByDefault bool
	rules          []rule
}

// rule is one compiled rule.
type rule struct {
	allow bool
	// exact are the host names matched as written; suffixes the names
	// matched by "*.name", as ".name"; anyName is "*".
	exact    []string
	suffixes []string
	anyName  bool
	cidrs    []netip.Prefix
	// ports are the ports matched, sorted; empty matches every port.
	ports []uint16
	// everything is a rule with neither hosts nor cidrs: it matches
	// every destination on its ports.
	everything bool
}

// AllowAll is the policy that lets everything through except private
// addresses: what an unscoped peer gets when the Host allows unscoped
// egress, and a profile that declares no egress.
var AllowAll = &Policy{allowByDefault: true}

// DenyAll is the policy that refuses everything.
var DenyAll = &Policy{}

// Compile compiles a declared egress policy. It returns an error when
// spec is not valid as v1alpha1 validates it; a spec the loader accepted
// always compiles. A nil spec compiles to DenyAll.
func Compile(spec *v1alpha1.EgressSpec) (*Policy, error) {
	if spec == nil {
		return DenyAll, nil
	}
	p := &Policy{rules: make([]rule, 0, len(spec.Rules))}
	switch spec.Default {
	case v1alpha1.EgressAllow:
		p.allowByDefault = true
	case v1alpha1.EgressDeny, "":
	default:
		return nil, fmt.Errorf("default: %q is not allow or deny", spec.Default)
	}
	for i, r := range spec.Rules {
		c, err := compileRule(r)
		if err != nil {
			return nil, fmt.Errorf("rules[%d]: %w", i, err)
		}
		p.rules = append(p.rules, c)
	}
	return p, nil
}

func compileRule(r v1alpha1.EgressRule) (rule, error) {
	var c rule
	switch r.Action {
	case v1alpha1.EgressAllow:
		c.allow = true
	case v1alpha1.EgressDeny:
	default:
		return rule{}, fmt.Errorf("action: %q is not allow or deny", r.Action)
	}
	for j, h := range r.Hosts {
		if msgs := v1alpha1.ValidateHostPattern(h); msgs != nil {
			return rule{}, fmt.Errorf("hosts[%d]: %s", j, msgs[0])
		}
		switch {
		case h == "*":
			c.anyName = true
		case strings.HasPrefix(h, "*."):
			c.suffixes = append(c.suffixes, h[1:])
		default:
			c.exact = append(c.exact, h)
		}
	}
	for j, s := range r.CIDRs {
		if msgs := v1alpha1.ValidateCIDR(s); msgs != nil {
			return rule{}, fmt.Errorf("cidrs[%d]: %s", j, msgs[0])
		}
		c.cidrs = append(c.cidrs, netip.MustParsePrefix(s))
	}
	for j, port := range r.Ports {
		if port < v1alpha1.MinPort || port > v1alpha1.MaxPort {
			return rule{}, fmt.Errorf("ports[%d]: %d is not a port", j, port)
		}
		c.ports = append(c.ports, uint16(port))
	}
	slices.Sort(c.ports)
	c.ports = slices.Compact(c.ports)
	c.everything = len(r.Hosts) == 0 && len(r.CIDRs) == 0
	return c, nil
}

// how a rule matched a destination.
type match uint8

const (
	noMatch match = iota
	// named: an exact host name, or a CIDR containing the address.
	named
	// unnamed: a wildcard host, or a rule that matches everything.
	unnamed
)

func (r *rule) port(port uint16) bool {
	if len(r.ports) == 0 {
		return true
	}
	_, ok := slices.BinarySearch(r.ports, port)
	return ok
}

// byName says how r matches host on port by name alone.
func (r *rule) byName(host string, port uint16) match {
	if host == "" || !r.port(port) {
		return noMatch
	}
	if slices.Contains(r.exact, host) {
		return named
	}
	if r.anyName {
		return unnamed
	}
	for _, s := range r.suffixes {
		if strings.HasSuffix(host, s) {
			return unnamed
		}
	}
	return noMatch
}

// matches says how r matches the destination.
func (r *rule) matches(host string, addr netip.Addr, port uint16) match {
	if !r.port(port) {
		return noMatch
	}
	m := r.byName(host, port)
	if m == named {
		return named
	}
	for _, c := range r.cidrs {
		if c.Contains(addr) {
			return named
		}
	}
	if r.everything {
		return unnamed
	}
	return m
}

// Decide decides a connection to addr:port, asked for by the name host
// (normalized, as Host returns it; "" when the destination was given as
// an IP address). addr is the address that would be dialed.
func (p *Policy) Decide(host string, addr netip.Addr, port uint16) Decision {
	return p.DecideWith(host, addr, port, nil)
}

// DecideWith is Decide, with the host's own addresses (own, nil for none)
// closed as private ranges are: only a rule that names them reaches them.
func (p *Policy) DecideWith(host string, addr netip.Addr, port uint16, own HostAddresses) Decision {
	addr = addr.Unmap()
	var closed Reason
	switch {
	case Private(addr):
		closed = ReasonPrivate
	case hostAddress(own, addr):
		closed = ReasonHostAddress
	}
	for i := range p.rules {
		r := &p.rules[i]
		m := r.matches(host, addr, port)
		if m == noMatch || r.allow && closed != "" && m != named {
			// An allow rule reaches a closed address only by naming it.
			continue
		}
		return Decision{Allow: r.allow, Rule: i, Reason: ReasonRule}
	}
	if closed != "" {
		return Decision{Rule: -1, Reason: closed}
	}
	return Decision{Allow: p.allowByDefault, Rule: -1, Reason: ReasonDefault}
}

// Prejudge decides by name alone, before host is resolved: it returns a
// denial and true when every address host could resolve to would be
// denied on port, so that a denied name is not even looked up. It returns
// false when the answer depends on the addresses.
func (p *Policy) Prejudge(host string, port uint16) (Decision, bool) {
	if host == "" {
		return Decision{}, false
	}
	for i := range p.rules {
		r := &p.rules[i]
		if r.everything || len(r.cidrs) > 0 {
			// This rule, or one before a name match further down, may
			// match by address.
			if r.port(port) {
				return Decision{}, false
			}
			continue
		}
		if r.byName(host, port) == noMatch {
			continue
		}
		if !r.allow {
			return Decision{Rule: i, Reason: ReasonRule}, true
		}
		return Decision{}, false
	}
	if !p.allowByDefault {
		return Decision{Rule: -1, Reason: ReasonDefault}, true
	}
	return Decision{}, false
}
