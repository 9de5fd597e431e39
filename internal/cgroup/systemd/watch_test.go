package systemd

import (
	"testing"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

func TestUnitNameFromPath(t *testing.T) {
	tests := []struct {
		name string
		path dbus.ObjectPath
		want string
	}{
		{
			name: "scope_with_escaped_profile",
			path: "/org/freedesktop/systemd1/unit/marshal_2dmy_5cx2dagent_2d0123456789abcdef0123456789abcdef_2escope",
			want: `marshal-my\x2dagent-0123456789abcdef0123456789abcdef.scope`,
		},
		{name: "slice", path: "/org/freedesktop/systemd1/unit/marshal_2eslice", want: "marshal.slice"},
		{name: "leading_digit", path: "/org/freedesktop/systemd1/unit/_31_2eservice", want: "1.service"},
		{name: "not_a_unit", path: "/org/freedesktop/systemd1/job/42", want: ""},
		{name: "manager", path: "/org/freedesktop/systemd1", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := unitNameFromPath(tc.path); got != tc.want {
				t.Errorf("unitNameFromPath(%q) = %q, want %q", tc.path, got, tc.want)
			}
			// go-systemd's escaping, which systemd's matches, is the oracle.
			if tc.want != "" {
				if p := unitPathNS + "/" + dbus.ObjectPath(sdbus.PathBusEscape(tc.want)); p != tc.path {
					t.Errorf("PathBusEscape(%q) = %q, want %q", tc.want, p, tc.path)
				}
			}
		})
	}
}
