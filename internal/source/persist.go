package source

import (
	"encoding/json"
	"fmt"

	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// persisted is the stored form of one last good object.
type persisted struct {
	Line   int             `json:"line"`
	Kind   string          `json:"kind"`
	Object json.RawMessage `json:"object"`
}

func encodeGood(objs []loader.Object) []byte {
	ps := make([]persisted, 0, len(objs))
	for _, o := range objs {
		raw, err := json.Marshal(o.Object)
		if err != nil {
			continue
		}
		ps = append(ps, persisted{Line: o.Line, Kind: o.GetTypeMeta().Kind, Object: raw})
	}
	b, _ := json.Marshal(ps)
	return b
}

func decodeGood(rel string, data []byte) ([]loader.Object, error) {
	var ps []persisted
	if err := json.Unmarshal(data, &ps); err != nil {
		return nil, err
	}
	objs := make([]loader.Object, 0, len(ps))
	for _, p := range ps {
		obj := v1alpha1.New(p.Kind)
		if obj == nil {
			return nil, fmt.Errorf("unknown kind %q", p.Kind)
		}
		if err := json.Unmarshal(p.Object, obj); err != nil {
			return nil, err
		}
		objs = append(objs, loader.Object{Object: obj, File: rel, Line: p.Line})
	}
	return objs, nil
}
