package controllers

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
)

func TestLimitStatuses(t *testing.T) {
	page := int64(os.Getpagesize())
	v1 := func(r cgroup.Resource) cgroup.Enforcement {
		return cgroup.Enforcement{Level: v1alpha1.LevelKernel, Method: cgroup.MethodCgroupV1, Controller: cgroup.LimitFile(r, cgroup.MethodCgroupV1)}
	}
	tests := []struct {
		name        string
		want        cgroup.Limits
		applied     cgroup.Applied
		wantRows    []string
		wantMissing []string
	}{
		{name: "none_requested_none_applied"},
		{name: "all_in_force",
			want: cgroup.Limits{CPUMilli: 500, MemoryBytes: 64 << 20, Tasks: 64},
			applied: cgroup.Applied{Limits: cgroup.Limits{CPUMilli: 500, MemoryBytes: 64 << 20, Tasks: 64},
				Enforced: map[cgroup.Resource]cgroup.Enforcement{cgroup.CPU: v1(cgroup.CPU), cgroup.Memory: v1(cgroup.Memory), cgroup.PIDs: v1(cgroup.PIDs)}},
			wantRows: []string{"cpu 500/500 kernel cgroup_v1", "memory 67108864/67108864 kernel cgroup_v1", "pids 64/64 kernel cgroup_v1"}},
		{name: "memory_rounded_down_to_a_page_is_in_force",
			want:     cgroup.Limits{MemoryBytes: 10*page + 1},
			applied:  cgroup.Applied{Limits: cgroup.Limits{MemoryBytes: 10 * page}, Enforced: map[cgroup.Resource]cgroup.Enforcement{cgroup.Memory: v1(cgroup.Memory)}},
			wantRows: []string{fmt.Sprintf("memory %d/%d kernel cgroup_v1", 10*page+1, 10*page)}},
		{name: "missing_controller",
			want:        cgroup.Limits{CPUMilli: 500, Tasks: 64},
			applied:     cgroup.Applied{Limits: cgroup.Limits{CPUMilli: 500}, Enforced: map[cgroup.Resource]cgroup.Enforcement{cgroup.CPU: v1(cgroup.CPU)}},
			wantRows:    []string{"cpu 500/500 kernel cgroup_v1", "pids 64/0 accounted accounting"},
			wantMissing: []string{"pids (requested 64, applied none)"}},
		{name: "limit_left_that_was_not_requested",
			applied:     cgroup.Applied{Limits: cgroup.Limits{Tasks: 64}, Enforced: map[cgroup.Resource]cgroup.Enforcement{cgroup.PIDs: v1(cgroup.PIDs)}},
			wantRows:    []string{"pids 0/64 kernel cgroup_v1"},
			wantMissing: []string{"pids (requested none, applied 64)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows, missing := limitStatuses(tc.want, tc.applied)
			var got []string
			for _, r := range rows {
				got = append(got, fmt.Sprintf("%s %d/%d %s %s", r.Resource, r.Requested, r.Applied, r.Enforcement.Level, r.Enforcement.Method))
			}
			if !slices.Equal(got, tc.wantRows) || !slices.Equal(missing, tc.wantMissing) {
				t.Errorf("limitStatuses(%+v, %+v) = %q, %q; want %q, %q", tc.want, tc.applied, got, missing, tc.wantRows, tc.wantMissing)
			}
		})
	}
}
