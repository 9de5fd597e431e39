package controllers

import "testing"

func TestMemTotal(t *testing.T) {
	tests := []struct {
		name    string
		meminfo string
		want    int64
		wantErr bool
	}{
		{name: "first_line", meminfo: "MemTotal:        4017456 kB\nMemFree:  1 kB\n", want: 4017456 << 10},
		{name: "later_line", meminfo: "MemFree:  1 kB\nMemTotal: 2 kB\n", want: 2 << 10},
		{name: "missing", meminfo: "MemFree:  1 kB\n", wantErr: true},
		{name: "not_kb", meminfo: "MemTotal: 2 MB\n", wantErr: true},
		{name: "not_a_number", meminfo: "MemTotal: x kB\n", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := memTotal([]byte(tc.meminfo))
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("memTotal(%q) = %d, %v; want %d, error %v", tc.meminfo, got, err, tc.want, tc.wantErr)
			}
		})
	}
}
