package admission

import (
	"errors"
	"runtime"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

func TestSystemReservationLeavesWorkOnSmallMachines(t *testing.T) {
	for _, tc := range []struct {
		name    string
		machine Machine
		want    Budget // the work capacity left
	}{
		{"two_cpus_4gib", Machine{2000, 4 * gib, 32768}, Budget{1500, 3 * gib, 24576}},
		{"one_cpu_1gib", Machine{1000, gib, 4096}, Budget{500, gib / 2, 3072}},
		{"eight_cpus_16gib", Machine{8000, 16 * gib, 4194304}, Budget{6000, 12 * gib, 3145728}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, src, err := WorkCapacity(nil, func() (Machine, error) { return tc.machine, nil })
			if err != nil || got != tc.want || src != (CapacitySource{SourceMeasured, SourceMeasured, SourceMeasured}) {
				t.Fatalf("WorkCapacity = %+v %+v %v, want %+v measured", got, src, err, tc.want)
			}
			if fits := got.CPUMilli / 250; tc.machine.CPUMilli == 2000 && fits < 6 {
				t.Errorf("a 2-CPU machine fits %d default requests, want at least 6", fits)
			}
		})
	}
}

func TestDeclaredCapacityIsTakenAsItIs(t *testing.T) {
	cpu, mem := int64(1600), int64(8*gib)
	measured := 0
	measure := func() (Machine, error) { measured++; return Machine{4000, 16 * gib, 8192}, nil }
	got, src, err := WorkCapacity(&v1alpha1.Capacity{CPUMilli: &cpu, MemoryBytes: &mem}, measure)
	if err != nil || got != (Budget{1600, 8 * gib, 6144}) || src != (CapacitySource{SourceDeclared, SourceDeclared, SourceMeasured}) {
		t.Fatalf("WorkCapacity = %+v %+v %v", got, src, err)
	}
	tasks := int64(100)
	measured = 0
	got, _, err = WorkCapacity(&v1alpha1.Capacity{CPUMilli: &cpu, MemoryBytes: &mem, Tasks: &tasks}, measure)
	if err != nil || got != (Budget{1600, 8 * gib, 100}) || measured != 0 {
		t.Fatalf("fully declared: %+v %v, measured %d times; want no measuring", got, err, measured)
	}
	failing := func() (Machine, error) { return Machine{}, errors.New("no /proc") }
	if _, _, err := WorkCapacity(nil, failing); err == nil {
		t.Fatal("a failed measurement gave a capacity")
	}
	zero := int64(0)
	if _, _, err := WorkCapacity(&v1alpha1.Capacity{CPUMilli: &zero, MemoryBytes: &mem, Tasks: &tasks}, measure); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("zero declared cpu = %v, want %v", err, ErrInvalidRequest)
	}
}

func TestMeasureMachineReadsThisHost(t *testing.T) {
	m, err := MeasureMachine()
	if err != nil {
		t.Fatal(err)
	}
	if m.CPUMilli != int64(runtime.NumCPU())*1000 || m.MemoryBytes <= 0 || m.Tasks <= 0 {
		t.Fatalf("MeasureMachine() = %+v, want %d CPUs and positive memory and tasks", m, runtime.NumCPU())
	}
}
