package daemon

import (
	"strings"
	"testing"
)

// --source and the flags of --source kubernetes are checked before
// anything is opened.
func TestValidateSource(t *testing.T) {
	tests := []struct {
		name    string
		source  string
		k       KubernetesConfig
		wantErr string
	}{
		{name: "default_is_the_dir", source: ""},
		{name: "dir", source: SourceDir},
		{name: "kubernetes", source: SourceKubernetes, k: KubernetesConfig{HostName: "ci-07", Selector: "marshal.dev/pool=ci"}},
		{name: "unknown_source", source: "etcd", wantErr: `--source "etcd"`},
		{name: "bad_selector", source: SourceKubernetes, k: KubernetesConfig{Selector: "pool in (a"}, wantErr: "--selector"},
		{name: "host_name_not_a_label", source: SourceKubernetes, k: KubernetesConfig{HostName: "ci.example.com"}, wantErr: `invalid host name "ci.example.com"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := DefaultConfig(0, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			c.Source, c.Kubernetes = tc.source, tc.k
			err = c.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate = %v, want it to say %q", err, tc.wantErr)
			}
		})
	}
}
