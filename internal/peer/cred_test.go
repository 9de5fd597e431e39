package peer

import (
	"encoding/json"
	"testing"
)

func TestCredJSON(t *testing.T) {
	cred, err := json.Marshal(Cred{PID: 7, UID: 1000, GID: 100})
	if err != nil || string(cred) != `{"pid":7,"uid":1000,"gid":100}` {
		t.Errorf("json.Marshal(Cred) = %s, %v", cred, err)
	}
}
