package egress

import (
	"sync"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/egress/policy"
	"github.com/marshal-dev/marshal/internal/peer"
	"github.com/marshal-dev/marshal/reconcile"
)

// policyCache compiles each profile's policy once per generation: every
// decision still reads the declared policy, and compiles it again only
// when the profile changed.
type policyCache struct {
	src Policies
	// mu guards byProfile.
	mu        sync.Mutex
	byProfile map[string]cachedPolicy
}

type cachedPolicy struct {
	generation int64
	policy     *policy.Policy
}

// forProfile returns the policy of a peer in a launch of profile, or the
// reason it has none: the profile is not declared (ReasonNoProfile), or
// its policy does not compile, which a loaded manifest never does.
func (c *policyCache) forProfile(profile string) (*policy.Policy, string) {
	spec, gen, ok := c.src.Egress(profile)
	if !ok {
		return nil, ReasonNoProfile
	}
	if spec == nil {
		// Egress is not governed: as without the proxy, but for the
		// private ranges.
		return policy.AllowAll, ""
	}
	c.mu.Lock()
	cached, ok := c.byProfile[profile]
	c.mu.Unlock()
	if ok && cached.generation == gen && gen != 0 {
		return cached.policy, ""
	}
	pol, err := policy.Compile(spec)
	if err != nil {
		return nil, ReasonNoProfile
	}
	c.mu.Lock()
	c.byProfile[profile] = cachedPolicy{generation: gen, policy: pol}
	c.mu.Unlock()
	return pol, ""
}

// forPeer returns the policy of who, or the reason it has none.
func (c *policyCache) forPeer(who peer.Who) (*policy.Policy, string) {
	if who.Scoped() {
		return c.forProfile(who.Profile)
	}
	return c.forUnscoped()
}

// forUnscoped returns the policy of a peer in no launch, or
// ReasonUnscoped when the Host does not allow unscoped egress.
func (c *policyCache) forUnscoped() (*policy.Policy, string) {
	if c.src.Unscoped() == v1alpha1.EgressAllow {
		return policy.AllowAll, ""
	}
	return nil, ReasonUnscoped
}

// StorePolicies reads the policies where marshald keeps what is declared:
// the Profiles' spec.egress and the Host's, in the desired store.
type StorePolicies struct{ Desired *reconcile.DesiredStore }

var _ Policies = StorePolicies{}

// Egress implements Policies.
func (p StorePolicies) Egress(profile string) (*v1alpha1.EgressSpec, int64, bool) {
	obj, ok := p.Desired.Get(reconcile.Key{Kind: v1alpha1.KindProfile, Name: profile})
	if !ok {
		return nil, 0, false
	}
	prof, ok := obj.(*v1alpha1.Profile)
	if !ok {
		return nil, 0, false
	}
	return prof.Spec.Egress, prof.Metadata.Generation, true
}

// Unscoped implements Policies.
func (p StorePolicies) Unscoped() v1alpha1.EgressAction {
	for _, obj := range p.Desired.List(v1alpha1.KindHost) {
		if h, ok := obj.(*v1alpha1.Host); ok && h.Spec.Egress != nil {
			return h.Spec.Egress.Unscoped
		}
	}
	return ""
}
