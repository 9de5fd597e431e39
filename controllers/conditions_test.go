package controllers_test

import (
	"slices"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
)

func TestSetCondition(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	ready := func(s v1alpha1.ConditionStatus, reason, msg string, gen int64, at time.Time) v1alpha1.Condition {
		return v1alpha1.Condition{Type: v1alpha1.ConditionReady, Status: s, Reason: reason, Message: msg,
			ObservedGeneration: gen, LastTransitionTime: at}
	}
	invalid := v1alpha1.Condition{Type: v1alpha1.ConditionInvalid, Status: v1alpha1.ConditionFalse, LastTransitionTime: t0}
	tests := []struct {
		name    string
		conds   []v1alpha1.Condition
		set     v1alpha1.Condition
		want    []v1alpha1.Condition
		changed bool
	}{
		{name: "added_at_now",
			set:  ready("True", "A", "a", 1, time.Time{}),
			want: []v1alpha1.Condition{ready("True", "A", "a", 1, t1)}, changed: true},
		{name: "added_with_its_own_time",
			set:  ready("True", "A", "a", 1, t0),
			want: []v1alpha1.Condition{ready("True", "A", "a", 1, t0)}, changed: true},
		{name: "unchanged",
			conds: []v1alpha1.Condition{ready("True", "A", "a", 1, t0)},
			set:   ready("True", "A", "a", 1, time.Time{}),
			want:  []v1alpha1.Condition{ready("True", "A", "a", 1, t0)}},
		{name: "status_flip_moves_the_time",
			conds: []v1alpha1.Condition{invalid, ready("True", "A", "a", 1, t0)},
			set:   ready("False", "B", "b", 1, time.Time{}),
			want:  []v1alpha1.Condition{invalid, ready("False", "B", "b", 1, t1)}, changed: true},
		{name: "reason_and_message_keep_the_time",
			conds: []v1alpha1.Condition{ready("False", "A", "a", 1, t0)},
			set:   ready("False", "B", "b", 1, time.Time{}),
			want:  []v1alpha1.Condition{ready("False", "B", "b", 1, t0)}, changed: true},
		{name: "generation_keeps_the_time",
			conds: []v1alpha1.Condition{ready("True", "A", "a", 1, t0)},
			set:   ready("True", "A", "a", 2, time.Time{}),
			want:  []v1alpha1.Condition{ready("True", "A", "a", 2, t0)}, changed: true},
		{name: "given_time_ignored_without_a_flip",
			conds: []v1alpha1.Condition{ready("True", "A", "a", 1, t0)},
			set:   ready("True", "A", "a", 1, t1),
			want:  []v1alpha1.Condition{ready("True", "A", "a", 1, t0)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.conds)
			got, changed := controllers.SetCondition(tc.conds, tc.set, t1)
			if !slices.Equal(got, tc.want) || changed != tc.changed {
				t.Errorf("SetCondition(%v, %v) = %v, %v; want %v, %v", tc.conds, tc.set, got, changed, tc.want, tc.changed)
			}
			if !slices.Equal(tc.conds, before) {
				t.Errorf("SetCondition modified its input: %v, was %v", tc.conds, before)
			}
		})
	}
}
