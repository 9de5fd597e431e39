package metrics

import (
	"sync"
	"testing"
	"time"
)

// authority is an AdmissionSource the test changes between scrapes.
type authority struct {
	mu sync.Mutex
	st AdmissionState
}

func (a *authority) AdmissionState() AdmissionState {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st
}

func (a *authority) set(st AdmissionState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.st = st
}

func TestAdmissionMetrics(t *testing.T) {
	capacity := Amounts{CPUMilli: 1600, MemoryBytes: 8 << 30, Tasks: 4096}
	auth := &authority{st: AdmissionState{Ready: true, Capacity: capacity, Target: capacity, Free: capacity}}
	m, err := New(Options{Admission: auth})
	if err != nil {
		t.Fatal(err)
	}
	url := server(t, m)

	type sample struct {
		name   string
		labels []string
		want   float64
	}
	check := func(when string, s scrape, samples []sample) {
		t.Helper()
		for _, c := range samples {
			if got := s.value(t, c.name, c.labels...); got != c.want {
				t.Errorf("%s: %s%s = %v, want %v", when, c.name, labelString(c.labels), got, c.want)
			}
		}
	}
	cpu, mem, tasks := []string{"resource", "cpu", "unit", "core"}, []string{"resource", "memory", "unit", "byte"}, []string{"resource", "tasks", "unit", "task"}
	check("idle", get(t, url), []sample{
		{"marshal_admission_ready", nil, 1},
		{"marshal_admission_capacity", cpu, 1.6},
		{"marshal_admission_capacity", mem, 8 << 30},
		{"marshal_admission_capacity", tasks, 4096},
		{"marshal_admission_committed", cpu, 0},
		{"marshal_admission_free", cpu, 1.6},
		{"marshal_admission_target", tasks, 4096},
		{"marshal_admission_charged_attempts", nil, 0},
	})

	// Two attempts admitted under half pressure; a third denied.
	half := Amounts{CPUMilli: 800, MemoryBytes: 4 << 30, Tasks: 2048}
	committed := Amounts{CPUMilli: 500, MemoryBytes: 512 << 20, Tasks: 64}
	auth.set(AdmissionState{Ready: true, Capacity: capacity, Target: half, Committed: committed,
		Free: Amounts{CPUMilli: 300, MemoryBytes: 4<<30 - 512<<20, Tasks: 1984}, Charged: 2})
	m.ObserveAdmission("prepared")
	m.ObserveAdmission("prepared")
	m.ObserveAdmission("resource_unavailable")
	m.ObserveLaunch("started", 3*time.Millisecond)
	m.ObserveLaunch("workspace_busy", 200*time.Microsecond)
	s := get(t, url)
	check("after two admissions", s, []sample{
		{"marshal_admission_capacity", cpu, 1.6},
		{"marshal_admission_target", cpu, 0.8},
		{"marshal_admission_committed", cpu, 0.5},
		{"marshal_admission_committed", mem, 512 << 20},
		{"marshal_admission_free", cpu, 0.3},
		{"marshal_admission_free", tasks, 1984},
		{"marshal_admission_charged_attempts", nil, 2},
		{"marshal_admissions_total", []string{"result", "prepared"}, 2},
		{"marshal_admissions_total", []string{"result", "resource_unavailable"}, 1},
		{"marshal_launch_duration_seconds", []string{"result", "started"}, 1},
		{"marshal_launch_duration_seconds", []string{"result", "workspace_busy"}, 1},
	})
	if sum := s.find("marshal_launch_duration_seconds", "result", "started").GetHistogram().GetSampleSum(); sum != 0.003 {
		t.Errorf("launch duration sum{started} = %v, want 0.003", sum)
	}

	auth.set(AdmissionState{Capacity: capacity}) // the journal failed
	if got := get(t, url).value(t, "marshal_admission_ready"); got != 0 {
		t.Errorf("authority not ready: admission_ready = %v, want 0", got)
	}
}
