package v1alpha1

// Allows reports whether c grants action. A nil c grants nothing.
func (c *ControlSpec) Allows(action ControlAction) bool {
	if c == nil {
		return false
	}
	for _, a := range c.Allow {
		if a == action {
			return true
		}
	}
	return false
}

// RunsInto reports whether c lets its agents run into workspace, besides
// their own. A nil c grants none.
func (c *ControlSpec) RunsInto(workspace string) bool {
	if c == nil {
		return false
	}
	for _, w := range c.Run {
		if w == workspace {
			return true
		}
	}
	return false
}

// PresentsConsumer reports whether c lets its agents present the secret
// of the Consumer named consumer. A nil c grants none.
func (c *ControlSpec) PresentsConsumer(consumer string) bool {
	if c == nil {
		return false
	}
	for _, n := range c.Consumers {
		if n == consumer {
			return true
		}
	}
	return false
}

// control checks a profile's spec.control.
func (v *validator) control(p Path, c *ControlSpec) {
	names := func(field string, list []string) {
		seen := make(map[string]bool, len(list))
		for i, n := range list {
			ip := p.Child(field).Index(i)
			for _, msg := range ValidateName(n) {
				v.add(ip, "%s", msg)
			}
			if seen[n] {
				v.add(ip, "%q is named twice", n)
			}
			seen[n] = true
		}
	}
	names("run", c.Run)
	names("consumers", c.Consumers)
	seen := make(map[ControlAction]bool, len(c.Allow))
	for i, a := range c.Allow {
		ip := p.Child("allow").Index(i)
		if a == "" {
			v.add(ip, "required")
			continue
		}
		enum(v, ip, a, ControlActions...)
		if seen[a] {
			v.add(ip, "%q is named twice", a)
		}
		seen[a] = true
	}
}
