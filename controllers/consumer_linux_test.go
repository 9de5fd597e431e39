package controllers_test

import (
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
)

func consumer(name, id, digest string) *v1alpha1.Consumer {
	c := &v1alpha1.Consumer{
		TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.KindConsumer},
		Metadata: v1alpha1.ObjectMeta{Name: name},
		Spec: v1alpha1.ConsumerSpec{
			ConsumerID: id, Generation: "g1", Role: v1alpha1.RoleWorkload,
			CredentialSHA256: digest, MaxInstances: ptr(int64(1)),
		},
	}
	c.Default()
	return c
}

func digestOf(c byte) string { return strings.Repeat(string(c), 64) }

// A Consumer is Ready while its id and its credential are its own; a
// clash refuses both sides, and resolving it makes both Ready again.
func TestConsumerReadyFollowsClashes(t *testing.T) {
	h := newHarness(t, controllers.FakeKernel(t), harnessOptions{})
	h.declare(consumer("codespace", "", digestOf('a')))
	h.declare(consumer("ci", "CI:bot", digestOf('b')))
	h.start()

	readyOf := func(name string) v1alpha1.Condition {
		st, _ := h.s.Consumers.Get(controllers.ConsumerKey(name))
		return cond(st.Conditions, v1alpha1.ConditionReady)
	}
	waitReady := func(step, name string, status v1alpha1.ConditionStatus, reason string) {
		t.Helper()
		h.waitFor(step+": "+name+" Ready "+string(status), func() bool {
			c := readyOf(name)
			return c.Status == status && c.Reason == reason
		})
	}
	waitReady("declared", "codespace", v1alpha1.ConditionTrue, controllers.ReasonConsumerReady)
	waitReady("declared", "ci", v1alpha1.ConditionTrue, controllers.ReasonConsumerReady)
	if st, _ := h.s.Consumers.Get(controllers.ConsumerKey("ci")); st.ConsumerID != "CI:bot" {
		t.Errorf("ci's consumerID = %q, want spec.consumer_id CI:bot", st.ConsumerID)
	}

	h.declare(consumer("ci", "", digestOf('a')))
	waitReady("credential reused", "codespace", v1alpha1.ConditionFalse, controllers.ReasonCredentialReused)
	waitReady("credential reused", "ci", v1alpha1.ConditionFalse, controllers.ReasonCredentialReused)
	if msg := readyOf("codespace").Message; !strings.Contains(msg, "Consumer ci") {
		t.Errorf("codespace's Ready message = %q, want it to name ci", msg)
	}

	h.declare(consumer("ci", "codespace", digestOf('b')))
	waitReady("id clash", "ci", v1alpha1.ConditionFalse, controllers.ReasonConsumerIDConflict)
	waitReady("id clash", "codespace", v1alpha1.ConditionFalse, controllers.ReasonConsumerIDConflict)

	h.s.Desired.Delete(controllers.ConsumerKey("ci"))
	waitReady("other deleted", "codespace", v1alpha1.ConditionTrue, controllers.ReasonConsumerReady)
	h.waitFor("ci's status deleted", func() bool {
		_, ok := h.s.Consumers.Get(controllers.ConsumerKey("ci"))
		return !ok
	})

	admin := host("local", nil)
	admin.Spec.DevGuard = &v1alpha1.DevGuardSpec{AdminCredentialSHA256: digestOf('a')}
	h.declare(admin)
	waitReady("the administrator's credential", "codespace", v1alpha1.ConditionFalse, controllers.ReasonCredentialReused)
}
