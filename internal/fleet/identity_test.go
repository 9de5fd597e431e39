package fleet

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestIdentityCheck(t *testing.T) {
	tests := []struct {
		name    string
		user    string
		wantErr string
	}{
		{name: "this_host", user: "marshal:host:ci-07"},
		{name: "another_host", user: "marshal:host:ci-08", wantErr: `user "marshal:host:ci-08", which names host "ci-08", not "ci-07"`},
		{name: "a_prefix_of_the_name", user: "marshal:host:ci-0", wantErr: `names host "ci-0", not "ci-07"`},
		{name: "the_bare_host_name", user: "ci-07", wantErr: `user "ci-07", which names no host: host ci-07's is user "marshal:host:ci-07" in group marshal:hosts`},
		{name: "a_node", user: "system:node:ci-07", wantErr: "names no host"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Identity{User: tc.user}.Check("ci-07")
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Check = %v, want nil", err)
			case tc.wantErr != "" && (!errors.Is(err, ErrIdentity) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Check = %v, want ErrIdentity saying %q", err, tc.wantErr)
			}
		})
	}
}

// The API says who a credential is: a host's certificate names its host
// in marshal:hosts; another host's, or an administrator's, is refused.
func TestVerifyIdentity(t *testing.T) {
	server, admin := realAPI(t)
	id, err := VerifyIdentity(t.Context(), hostClient(t, server, "id-a"), "id-a")
	if err != nil || id.User != "marshal:host:id-a" || !id.InHostsGroup() || !slices.Contains(id.Groups, "system:authenticated") {
		t.Errorf("VerifyIdentity(id-a's credential, id-a) = %+v, %v; want user marshal:host:id-a in marshal:hosts", id, err)
	}
	if _, err := VerifyIdentity(t.Context(), hostClient(t, server, "id-a"), "id-b"); !errors.Is(err, ErrIdentity) || !strings.Contains(err.Error(), `names host "id-a"`) {
		t.Errorf("VerifyIdentity(id-a's credential, id-b) = %v, want ErrIdentity naming id-a", err)
	}
	if _, err := VerifyIdentity(t.Context(), admin, "id-a"); !errors.Is(err, ErrIdentity) || !strings.Contains(err.Error(), `user "admin", which names no host`) {
		t.Errorf("VerifyIdentity(the admin's credential, id-a) = %v, want ErrIdentity", err)
	}
}
