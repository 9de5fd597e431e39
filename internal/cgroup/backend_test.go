package cgroup

import (
	"os"
	"testing"
)

func TestAppliedSatisfies(t *testing.T) {
	page := int64(os.Getpagesize())
	tests := []struct {
		name    string
		applied Limits
		want    Limits
		ok      bool
	}{
		{name: "nothing_wanted", applied: Limits{}, want: Limits{}, ok: true},
		{name: "exact", applied: Limits{CPUMilli: 500, MemoryBytes: 1 << 30, Tasks: 10}, want: Limits{CPUMilli: 500, MemoryBytes: 1 << 30, Tasks: 10}, ok: true},
		{name: "memory_rounded_down_to_a_page", applied: Limits{MemoryBytes: 1e9 - 1e9%page}, want: Limits{MemoryBytes: 1e9}, ok: true},
		{name: "memory_a_page_short", applied: Limits{MemoryBytes: 1e9 - 1e9%page - page}, want: Limits{MemoryBytes: 1e9}, ok: false},
		{name: "memory_above", applied: Limits{MemoryBytes: 1e9 + 1}, want: Limits{MemoryBytes: 1e9}, ok: false},
		{name: "cpu_missing", applied: Limits{}, want: Limits{CPUMilli: 500}, ok: false},
		{name: "tasks_differ", applied: Limits{Tasks: 11}, want: Limits{Tasks: 10}, ok: false},
		{name: "extra_limit_in_force", applied: Limits{Tasks: 5}, want: Limits{}, ok: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := (Applied{Limits: tc.applied}).Satisfies(tc.want); got != tc.ok {
				t.Errorf("Applied{%+v}.Satisfies(%+v) = %v, want %v", tc.applied, tc.want, got, tc.ok)
			}
		})
	}
}
