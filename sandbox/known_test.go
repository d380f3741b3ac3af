package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestKnownModuleStartsInBackground checks that a module loaded before over
// the same cache dir, with the same configuration, is not run before Load
// returns (no instance yet, the description the first load recorded), that a
// call made before its background start serves at once, and that Close
// during that start ends it.
func TestKnownModuleStartsInBackground(t *testing.T) {
	dir := t.TempDir()
	first := load(t, newSandbox(t, Config{CacheDir: dir}), "samples/bench", ModuleConfig{})

	gate := make(chan struct{})
	s := newSandbox(t, Config{CacheDir: dir, warmGate: gate})
	m, err := s.Load(context.Background(), "samples/bench", wasmOf(t, "samples/bench"), ModuleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if m.warmDone == nil || m.Stats().Created != 0 {
		t.Fatalf("Load of a known module: background start %v, %d instances; want one under way and none made", m.warmDone != nil, m.Stats().Created)
	}
	if !reflect.DeepEqual(m.Description(), first.Description()) {
		t.Fatalf("description %+v, want the first load's %+v", m.Description(), first.Description())
	}
	if o := m.Invoke(context.Background(), orderPlaced(), 10*time.Second); o.Kind != Success {
		t.Fatalf("call before the background start: %v (%s)", o.Kind, o.Error())
	}
	close(gate)
	<-m.warmDone
	if st := m.Stats(); st.Created != 1 || st.Idle != 1 {
		t.Fatalf("after the call and the background start: %+v; want the call's instance reused, idle", st)
	}
}

// TestKnownModuleCloseDuringStart checks that closing a known module while
// its background start waits ends that start, with no instance left.
func TestKnownModuleCloseDuringStart(t *testing.T) {
	dir := t.TempDir()
	load(t, newSandbox(t, Config{CacheDir: dir}), "samples/bench", ModuleConfig{})
	s := newSandbox(t, Config{CacheDir: dir, warmGate: make(chan struct{})})
	m, err := s.Load(context.Background(), "samples/bench", wasmOf(t, "samples/bench"), ModuleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { m.Close(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end a background start held by its gate within 10s")
	}
	if st := m.Stats(); st.Live != 0 || st.Created != 0 {
		t.Fatalf("after Close: %+v, want no instance", st)
	}
}

// TestKnownModuleNeedsSameConfigAndRecord checks what makes a load start in
// the foreground again (an instance made before Load returns, and the
// record written anew): other configuration, a record spoiled or missing.
func TestKnownModuleNeedsSameConfigAndRecord(t *testing.T) {
	dir := t.TempDir()
	mc := ModuleConfig{Config: map[string]string{"a": "1"}}
	load(t, newSandbox(t, Config{CacheDir: dir}), "samples/bench", mc)
	k := newKnownModules(dir)
	first := func(mc ModuleConfig) string {
		m := load(t, newSandbox(t, Config{CacheDir: dir}), "samples/bench", mc)
		return filepath.Join(k.dir, knownKey(m.SHA256(), m.DeadlineGuard(), mc.withDefaults()))
	}
	record := first(mc)
	tests := []struct {
		name  string
		mc    ModuleConfig
		spoil func(t *testing.T)
	}{
		{"other config value", ModuleConfig{Config: map[string]string{"a": "2"}}, nil},
		{"other memory limit", ModuleConfig{Config: mc.Config, MemoryLimitPages: 512}, nil},
		{"other allowed hosts", ModuleConfig{Config: mc.Config, AllowedHosts: []string{"example.com"}}, nil},
		{"truncated", mc, func(t *testing.T) { truncate(t, record, 5) }},
		{"corrupt", mc, func(t *testing.T) {
			b, err := os.ReadFile(record)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)-1] ^= 0xff
			write(t, record, b)
		}},
		{"missing", mc, func(t *testing.T) {
			if err := os.Remove(record); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.spoil != nil {
				tt.spoil(t)
			}
			s := newSandbox(t, Config{CacheDir: dir, warmGate: make(chan struct{})})
			m, err := s.Load(context.Background(), "samples/bench", wasmOf(t, "samples/bench"), tt.mc)
			if err != nil {
				t.Fatal(err)
			}
			if m.warmDone != nil || m.Stats().Created != 1 {
				t.Fatalf("background start %v, %d instances after Load; want a foreground start", m.warmDone != nil, m.Stats().Created)
			}
			if _, ok := k.load(knownKey(m.SHA256(), m.DeadlineGuard(), tt.mc.withDefaults())); !ok {
				t.Error("the record was not written by the foreground start")
			}
		})
	}
}

// TestKnownKey checks that the record's key follows what a description may
// depend on, and not the order a configuration lists things in.
func TestKnownKey(t *testing.T) {
	base := ModuleConfig{Config: map[string]string{"a": "1", "b": "2"}, AllowedHosts: []string{"x", "y"}}.withDefaults()
	key := knownKey("sha", guardLoop, base)
	same := base
	same.Config = map[string]string{"b": "2", "a": "1"}
	same.AllowedHosts = []string{"y", "x"}
	if knownKey("sha", guardLoop, same) != key {
		t.Error("the key depends on the order of hosts or config keys")
	}
	for name, other := range map[string]func() string{
		"sha":   func() string { return knownKey("sha2", guardLoop, base) },
		"guard": func() string { return knownKey("sha", guardCloseOnDone, base) },
		"pages": func() string { c := base; c.MemoryLimitPages++; return knownKey("sha", guardLoop, c) },
		"init":  func() string { c := base; c.InitTimeout++; return knownKey("sha", guardLoop, c) },
		"host":  func() string { c := base; c.AllowedHosts = []string{"x"}; return knownKey("sha", guardLoop, c) },
		"config": func() string {
			c := base
			c.Config = map[string]string{"a": "1", "b": "3"}
			return knownKey("sha", guardLoop, c)
		},
		"key split": func() string {
			c := base
			c.Config = map[string]string{"a": "1b", "": "2"}
			return knownKey("sha", guardLoop, c)
		},
	} {
		if other() == key {
			t.Errorf("the key does not change with the %s", name)
		}
	}
}
