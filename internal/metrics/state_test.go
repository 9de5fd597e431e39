package metrics

import (
	"sync"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/reconcile"
)

func declare(t *testing.T, d *reconcile.DesiredStore, kind, name string) {
	t.Helper()
	obj := v1alpha1.New(kind)
	obj.GetObjectMeta().Name = name
	if _, err := d.Set(obj); err != nil {
		t.Fatal(err)
	}
}

func agentKey(id string) reconcile.Key {
	return reconcile.Key{Kind: v1alpha1.KindAgent, Name: "marshal-x-" + id + ".scope"}
}

// TestAgentsLive fills real stores as the controllers would and checks
// marshal_agents_live per profile as scopes fill, empty and go.
func TestAgentsLive(t *testing.T) {
	desired := reconcile.NewDesiredStore()
	agents := reconcile.NewStore(reconcile.StoreOptions[v1alpha1.AgentStatus]{})
	declare(t, desired, v1alpha1.KindProfile, "coder")
	declare(t, desired, v1alpha1.KindProfile, "writer")
	m, err := New(Options{Agents: agents, Declared: desired})
	if err != nil {
		t.Fatal(err)
	}
	url := server(t, m)

	live := func(s scrape, profile string) float64 {
		t.Helper()
		return s.value(t, "marshal_agents_live", "profile", profile)
	}
	s := get(t, url)
	if live(s, "coder") != 0 || live(s, "writer") != 0 {
		t.Errorf("no scopes: coder %v, writer %v; want both 0", live(s, "coder"), live(s, "writer"))
	}

	agents.Set(agentKey("1"), v1alpha1.AgentStatus{Profile: "coder", Populated: true})
	agents.Set(agentKey("2"), v1alpha1.AgentStatus{Profile: "coder", Populated: true})
	agents.Set(agentKey("3"), v1alpha1.AgentStatus{Profile: "coder"}) // created, not yet populated
	agents.Set(agentKey("4"), v1alpha1.AgentStatus{Profile: "gone", Populated: true})
	s = get(t, url)
	for profile, want := range map[string]float64{"coder": 2, "writer": 0, "gone": 1} {
		if got := live(s, profile); got != want {
			t.Errorf("agents_live{profile=%q} = %v, want %v", profile, got, want)
		}
	}

	agents.Set(agentKey("1"), v1alpha1.AgentStatus{Profile: "coder"}) // its processes exited
	agents.Delete(agentKey("4"))
	s = get(t, url)
	if got := live(s, "coder"); got != 1 {
		t.Errorf("after one coder agent exited: agents_live{coder} = %v, want 1", got)
	}
	if s.find("marshal_agents_live", "profile", "gone") != nil {
		t.Errorf("after the undeclared profile's scope went: agents_live{gone} is still exported")
	}
}

func TestAgentsLiveWithoutDeclared(t *testing.T) {
	agents := reconcile.NewStore(reconcile.StoreOptions[v1alpha1.AgentStatus]{})
	agents.Set(agentKey("1"), v1alpha1.AgentStatus{Profile: "coder", Populated: true})
	m, err := New(Options{Agents: agents})
	if err != nil {
		t.Fatal(err)
	}
	s := get(t, server(t, m))
	if got := s.value(t, "marshal_agents_live", "profile", "coder"); got != 1 {
		t.Errorf("agents_live{coder} = %v, want 1", got)
	}
	if _, ok := s["marshal_declared_objects"]; ok {
		t.Errorf("marshal_declared_objects exported without a declared store")
	}
}

// config is a ConfigSource the test changes between scrapes.
type config struct {
	mu sync.Mutex
	st ConfigState
}

func (c *config) ConfigState() ConfigState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st
}

func (c *config) set(st ConfigState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st = st
}

func TestDeclaredObjectsAndConfig(t *testing.T) {
	desired := reconcile.NewDesiredStore()
	declare(t, desired, v1alpha1.KindProfile, "coder")
	cfg := &config{st: ConfigState{Files: 1}}
	m, err := New(Options{Declared: desired, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	url := server(t, m)

	s := get(t, url)
	for kind, want := range map[string]float64{v1alpha1.KindProfile: 1, v1alpha1.KindWorkspace: 0, v1alpha1.KindHost: 0} {
		if got := s.value(t, "marshal_declared_objects", "kind", kind); got != want {
			t.Errorf("declared_objects{kind=%q} = %v, want %v", kind, got, want)
		}
	}
	if s.value(t, "marshal_config_files") != 1 || s.value(t, "marshal_config_load_errors") != 0 || s.value(t, "marshal_config_held") != 0 {
		t.Errorf("a dir of one good file: files %v, load errors %v, held %v; want 1, 0, 0",
			s.value(t, "marshal_config_files"), s.value(t, "marshal_config_load_errors"), s.value(t, "marshal_config_held"))
	}

	declare(t, desired, v1alpha1.KindWorkspace, "webapp")
	declare(t, desired, v1alpha1.KindHost, "local")
	desired.Delete(reconcile.Key{Kind: v1alpha1.KindProfile, Name: "coder"})
	cfg.set(ConfigState{Files: 3, Errors: 2, Held: true})
	s = get(t, url)
	for kind, want := range map[string]float64{v1alpha1.KindProfile: 0, v1alpha1.KindWorkspace: 1, v1alpha1.KindHost: 1} {
		if got := s.value(t, "marshal_declared_objects", "kind", kind); got != want {
			t.Errorf("after the changes: declared_objects{kind=%q} = %v, want %v", kind, got, want)
		}
	}
	if s.value(t, "marshal_config_files") != 3 || s.value(t, "marshal_config_load_errors") != 2 || s.value(t, "marshal_config_held") != 1 {
		t.Errorf("a held dir with two errors in three files: files %v, load errors %v, held %v; want 3, 2, 1",
			s.value(t, "marshal_config_files"), s.value(t, "marshal_config_load_errors"), s.value(t, "marshal_config_held"))
	}
}
