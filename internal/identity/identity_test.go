package identity

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/internal/scope"
)

const (
	testID    = "0123456789abcdef0123456789abcdef"
	otherID   = "fedcba9876543210fedcba9876543210"
	coderPath = "/marshal.slice/marshal-coder.slice/marshal-coder-" + testID + ".scope"
)

// hybrid returns /proc/<pid>/cgroup as a hybrid host prints it, with the
// given name=systemd and cgroup2 paths.
func hybrid(systemd, unified string) string {
	return "12:rdma:/\n11:hugetlb:/\n10:net_cls,net_prio:/\n9:name=systemd:" + systemd +
		"\n8:pids:/user.slice\n7:blkio:/\n6:freezer:/\n5:devices:/user.slice\n" +
		"4:memory:/user.slice\n3:cpuset:/\n2:cpu,cpuacct:/user.slice\n0::" + unified + "\n"
}

func TestParseProcCgroup(t *testing.T) {
	coder := scope.Identity{Profile: "coder", ID: testID, Scope: "marshal-coder-" + testID + ".scope", Path: coderPath}
	tests := []struct {
		name string
		data string
		want Identity // zero: ErrNotManaged
	}{
		{
			name: "unified_in_scope",
			data: "0::" + coderPath + "\n",
			want: Identity{Identity: coder, Hierarchy: Unified},
		},
		{
			name: "unified_sub_group_of_scope",
			data: "0::" + coderPath + "/sub/deeper\n",
			want: Identity{Identity: coder, Hierarchy: Unified},
		},
		{
			name: "unified_no_trailing_newline",
			data: "0::" + coderPath,
			want: Identity{Identity: coder, Hierarchy: Unified},
		},
		{
			name: "unified_under_a_parent",
			data: "0::/user.slice/user-0.slice/user@0.service/app.slice" + coderPath + "\n",
			want: Identity{Identity: scope.Identity{Profile: "coder", ID: testID, Scope: coder.Scope,
				Path: "/user.slice/user-0.slice/user@0.service/app.slice" + coderPath}, Hierarchy: Unified},
		},
		{
			name: "unified_colon_in_path",
			data: "0::/a:b" + coderPath + "\n",
			want: Identity{Identity: scope.Identity{Profile: "coder", ID: testID, Scope: coder.Scope, Path: "/a:b" + coderPath}, Hierarchy: Unified},
		},
		{
			name: "unified_escaped_profile",
			data: `0::/marshal.slice/marshal-my\x2dagent.slice/marshal-my\x2dagent-` + testID + ".scope\n",
			want: Identity{Identity: scope.Identity{Profile: "my-agent", ID: testID, Scope: `marshal-my\x2dagent-` + testID + ".scope",
				Path: `/marshal.slice/marshal-my\x2dagent.slice/marshal-my\x2dagent-` + testID + ".scope"}, Hierarchy: Unified},
		},
		{
			name: "unified_deleted_scope",
			data: "0::" + coderPath + " (deleted)\n",
			want: Identity{Identity: coder, Hierarchy: Unified, Deleted: true},
		},
		{
			name: "unified_outside_namespace_root",
			data: "0::/../.." + coderPath + "\n",
			want: Identity{Identity: scope.Identity{Profile: "coder", ID: testID, Scope: coder.Scope, Path: "/../.." + coderPath}, Hierarchy: Unified},
		},
		{
			name: "hybrid_scope_in_both",
			data: hybrid(coderPath, coderPath),
			want: Identity{Identity: coder, Hierarchy: Unified},
		},
		{
			name: "hybrid_scope_in_cgroup2_only",
			data: hybrid("/user.slice/user-0.slice/session-1.scope", coderPath),
			want: Identity{Identity: coder, Hierarchy: Unified},
		},
		{
			name: "hybrid_scope_in_name_systemd_only",
			data: hybrid(coderPath+"/sub", "/"),
			want: Identity{Identity: coder, Hierarchy: NameSystemd},
		},
		{
			name: "hybrid_disagreeing_cgroup2_wins",
			data: hybrid("/marshal.slice/marshal-other.slice/marshal-other-"+otherID+".scope", coderPath),
			want: Identity{Identity: coder, Hierarchy: Unified},
		},
		{
			name: "legacy_name_systemd_without_cgroup2",
			data: "2:cpu,cpuacct:/\n1:name=systemd:" + coderPath + "\n",
			want: Identity{Identity: coder, Hierarchy: NameSystemd},
		},
		{name: "unified_root", data: "0::/\n"},
		{name: "unified_session", data: "0::/user.slice/user-1000.slice/session-2.scope\n"},
		{name: "unified_profile_slice", data: "0::/marshal.slice/marshal-coder.slice\n"},
		{name: "unified_deleted_non_scope", data: "0::/marshal.slice/x (deleted)\n"},
		{name: "hybrid_neither", data: hybrid("/user.slice/user-0.slice/session-1.scope", "/user.slice")},
		{name: "scope_only_in_other_v1_controller", data: "8:pids:" + coderPath + "\n1:name=systemd:/\n0::/\n"},
		{name: "scope_in_named_hierarchy_other_than_systemd", data: "1:name=other:" + coderPath + "\n0::/\n"},
		{name: "empty", data: ""},
		{name: "garbage", data: "no colons here\n\n:\n"},
		{name: "v2_line_with_controllers_is_not_v2", data: "0:cpu:" + coderPath + "\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcCgroup([]byte(tc.data))
			if tc.want == (Identity{}) {
				if !errors.Is(err, ErrNotManaged) {
					t.Errorf("parseProcCgroup(%q) = %+v, %v, want ErrNotManaged", tc.data, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("parseProcCgroup(%q) = %+v, %v, want %+v", tc.data, got, err, tc.want)
			}
		})
	}
}

func TestNotManagedErrorNamesThePaths(t *testing.T) {
	_, err := parseProcCgroup([]byte(hybrid("/user.slice/session-1.scope", "/user.slice/x")))
	for _, want := range []string{`cgroup2 "/user.slice/x"`, `name=systemd "/user.slice/session-1.scope"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

func TestIdentityJSONIsFlat(t *testing.T) {
	id := Identity{
		Identity:  scope.Identity{Profile: "coder", ID: testID, Scope: "marshal-coder-" + testID + ".scope", Path: coderPath},
		PID:       42,
		Hierarchy: Unified,
	}
	got, err := json.Marshal(id)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"profile":"coder","id":"` + testID + `","scope":"marshal-coder-` + testID + `.scope","path":"` + coderPath +
		`","pid":42,"hierarchy":"cgroup2"}`
	if string(got) != want {
		t.Errorf("json.Marshal(%+v) = %s, want %s", id, got, want)
	}
	var back Identity
	if err := json.Unmarshal(got, &back); err != nil || back != id {
		t.Errorf("json.Unmarshal(%s) = %+v, %v, want %+v", got, back, err, id)
	}
}

func BenchmarkParseProcCgroup(b *testing.B) {
	data := []byte(hybrid("/user.slice/user-0.slice/session-1.scope", coderPath+"/sub"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseProcCgroup(data); err != nil {
			b.Fatal(err)
		}
	}
}
