package admission

import (
	"reflect"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
)

// storedRecordJSON is a record as journals on disk hold it. An attempt
// recorded by an earlier marshald must decode to the same record, and one
// written now must read the same to it: the encoding never changes
// without a schema migration.
const storedRecordJSON = `{"id":"0123456789abcdef0123456789abcdef","owner":"marshald","generation":7,"owner_process":{"uid":1000,"pid":42,"start_time":12345,"boot_id":"boot-1"},"digest":"d1","fingerprint":"f1","intent":{"profile":"interactive","requested":{"cpu_milli":1500,"memory_bytes":2147483648,"tasks":64},"minimum":{"cpu":"cooperative","memory":"kernel","pids":"accounted"}},"phase":"scope_bound","reservation":{"quantities":{"cpu_milli":1500,"memory_bytes":2147483648,"tasks":64},"prepared_at":"2026-01-02T03:04:05Z","deadline":"2026-01-02T03:05:05Z"},"plan":{"cpu":{"level":"cooperative","method":"qos_and_priority","reason":"no cpu controller"},"memory":{"level":"kernel","method":"cgroup_v2","controller":"memory.max"},"pids":{"level":"accounted","method":"accounting"}},"scope":"marshal-interactive-0123456789abcdef0123456789abcdef.scope","root":{"uid":1000,"pid":43,"start_time":12346,"boot_id":"boot-1"},"applied":{"limits":{"memory_bytes":2147483648,"tasks":64},"enforced":{"memory":{"level":"kernel","method":"cgroup_v2","controller":"memory.max"},"pids":{"level":"kernel","method":"cgroup_v2","controller":"pids.max"}}},"boot_id":"boot-1","permit_sha256":"abc"}`

func storedRecordFixture() *Record {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	q := Budget{CPUMilli: 1500, MemoryBytes: 2 << 30, Tasks: 64}
	kernel := func(file string) cgroup.Enforcement {
		return cgroup.Enforcement{Level: v1alpha1.LevelKernel, Method: cgroup.MethodCgroupV2, Controller: file}
	}
	r := &Record{
		ID: "0123456789abcdef0123456789abcdef", Owner: "marshald", Generation: 7,
		OwnerProcess: Process{UID: 1000, PID: 42, StartTime: 12345, BootID: "boot-1"},
		Digest:       "d1", Fingerprint: "f1",
		Intent: Intent{Profile: "interactive", Requested: q,
			Minimum: Levels{CPU: v1alpha1.LevelCooperative, Memory: v1alpha1.LevelKernel, PIDs: v1alpha1.LevelAccounted}},
		Phase:       PhaseScopeBound,
		Reservation: &Reservation{Quantities: q, PreparedAt: at, Deadline: at.Add(time.Minute)},
		Plan: &Plan{
			CPU:    cgroup.Enforcement{Level: v1alpha1.LevelCooperative, Method: cgroup.MethodQoS, Reason: "no cpu controller"},
			Memory: kernel("memory.max"),
			PIDs:   cgroup.Enforcement{Level: v1alpha1.LevelAccounted, Method: cgroup.MethodAccounting},
		},
		Scope:      "marshal-interactive-0123456789abcdef0123456789abcdef.scope",
		Root:       &Process{UID: 1000, PID: 43, StartTime: 12346, BootID: "boot-1"},
		Applied:    &cgroup.Applied{},
		BootID:     "boot-1",
		permitHash: "abc",
	}
	r.Applied.Record(cgroup.Memory, 2<<30, kernel("memory.max"))
	r.Applied.Record(cgroup.PIDs, 64, kernel("pids.max"))
	return r
}

func TestStoredRecordEncodingIsStable(t *testing.T) {
	want := storedRecordFixture()
	data, err := encodeRecord(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != storedRecordJSON {
		t.Errorf("encoded record:\n%s\nwant, as journals hold it:\n%s", data, storedRecordJSON)
	}
	got, err := decodeRecord(1, want.ID, []byte(storedRecordJSON))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded record:\n%+v\nwant:\n%+v", got, want)
	}
	again, err := encodeRecord(got)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != storedRecordJSON {
		t.Errorf("re-encoded record:\n%s\nwant:\n%s", again, storedRecordJSON)
	}
}
