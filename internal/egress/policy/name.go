package policy

import "slices"

// DecideName decides a name alone, as a resolver must before any
// connection: it allows host (normalized, as ParseHost returns it) when
// some port exists on which some rule, or the default, could allow a
// connection to it, whatever address it would have; else it denies it
// with what denied it on the last port tried. A rule that allows CIDRs
// could allow any name, which may resolve into them.
func (p *Policy) DecideName(host string) Decision {
	var denied Decision
	for _, port := range p.portClasses() {
		d, ok := p.mayAllowOn(host, port)
		if ok {
			return d
		}
		denied = d
	}
	return denied
}

// portClasses are one port of each class the rules tell apart: every
// port a rule names, and one no rule names, when one is left.
func (p *Policy) portClasses() []uint16 {
	var ports []uint16
	for i := range p.rules {
		ports = append(ports, p.rules[i].ports...)
	}
	slices.Sort(ports)
	ports = slices.Compact(ports)
	// The lowest port no rule names stands for all of them.
	next := uint16(1)
	for _, port := range ports {
		if port != next {
			break
		}
		next++
	}
	if next != 0 {
		ports = append(ports, next)
	}
	return ports
}

// mayAllowOn says whether some address of host could be allowed on port,
// with the decision that says so, or the one that refuses every address.
func (p *Policy) mayAllowOn(host string, port uint16) (Decision, bool) {
	for i := range p.rules {
		r := &p.rules[i]
		if !r.port(port) {
			continue
		}
		byName := r.byName(host, port) != noMatch
		switch {
		case r.allow && (byName || r.everything || len(r.cidrs) > 0):
			return Decision{Allow: true, Rule: i, Reason: ReasonRule}, true
		case !r.allow && (byName || r.everything):
			// Every address of host on port meets this rule first.
			return Decision{Rule: i, Reason: ReasonRule}, false
		}
		// A deny rule of CIDRs alone denies only some addresses.
	}
	if p.allowByDefault {
		return Decision{Allow: true, Rule: -1, Reason: ReasonDefault}, true
	}
	return Decision{Rule: -1, Reason: ReasonDefault}, false
}
