package cgroup

import "testing"

func TestSliceAndScopeNames(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name, slice, scope string
		wantSlice          bool
		wantScope          bool
	}{
		{name: "plain", slice: "marshal-coder.slice", scope: "marshal-coder-" + id + ".scope", wantSlice: true, wantScope: true},
		{name: "escaped_dash", slice: `marshal-my\x2dagent.slice`, scope: `marshal-my\x2dagent-` + id + ".scope", wantSlice: true, wantScope: true},
		{name: "unescaped_dash_is_nesting", slice: "marshal-my-agent.slice", scope: "marshal-my-agent-" + id + ".scope"},
		{name: "scope_of_another_profile", slice: "marshal-coder.slice", scope: "marshal-other-" + id + ".scope", wantSlice: true},
		{name: "foreign", slice: "user.slice", scope: "session-1.scope"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := sliceProfile(tc.slice); ok != tc.wantSlice {
				t.Errorf("sliceProfile(%q) ok = %v, want %v", tc.slice, ok, tc.wantSlice)
			}
			if _, ok := scopeIn(tc.slice, tc.scope); ok != tc.wantScope {
				t.Errorf("scopeIn(%q, %q) ok = %v, want %v", tc.slice, tc.scope, ok, tc.wantScope)
			}
		})
	}
}
