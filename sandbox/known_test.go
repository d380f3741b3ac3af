package sandbox

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/wasm/abi"
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

// TestKnownModuleRecordsItsFreshMemory checks that the record keeps the
// memory an instance had after its _initialize, so that a later start's
// first instance is made at that size at once (memoryHint), and that a
// record of the first version, without it, still serves.
func TestKnownModuleRecordsItsFreshMemory(t *testing.T) {
	dir := t.TempDir()
	first := load(t, newSandbox(t, Config{CacheDir: dir}), "samples/bench", ModuleConfig{})
	fresh := first.freshBytes.Load()
	if fresh == 0 {
		t.Fatal("no fresh memory size after the first load's instance")
	}
	again := func(t *testing.T) *Module {
		s := newSandbox(t, Config{CacheDir: dir, warmGate: make(chan struct{})})
		m, err := s.Load(context.Background(), "samples/bench", wasmOf(t, "samples/bench"), ModuleConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if m.warmDone == nil || m.Stats().Created != 0 {
			t.Fatalf("background start %v, %d instances after Load; want one under way and none made", m.warmDone != nil, m.Stats().Created)
		}
		return m
	}
	if m := again(t); m.memoryHint() != fresh {
		t.Errorf("a later start's first memory: %d bytes, want the recorded %d", m.memoryHint(), fresh)
	}

	k := newKnownModules(dir)
	key := knownKey(first.SHA256(), first.DeadlineGuard(), ModuleConfig{}.withDefaults())
	rec, ok := k.load(key)
	if !ok {
		t.Fatal("no record after the first load")
	}
	body := abi.AppendDescription(nil, &rec.desc)
	head := binary.LittleEndian.AppendUint32(slices.Clone(knownMagicV0), crc32.Checksum(body, castagnoli))
	write(t, filepath.Join(k.dir, key), append(head, body...))
	if m := again(t); m.memoryHint() != 0 || !reflect.DeepEqual(m.Description(), first.Description()) {
		t.Errorf("from a first-version record: hint %d, description %+v; want 0 and %+v", m.memoryHint(), m.Description(), first.Description())
	}
}

// TestCallWaitsForTheFirstInstance checks that a call that comes while a
// known module's background start makes its first instance waits for that
// instance instead of making one beside it, and then gets it.
func TestCallWaitsForTheFirstInstance(t *testing.T) {
	dir := t.TempDir()
	load(t, newSandbox(t, Config{CacheDir: dir}), "samples/bench", ModuleConfig{})
	gate := make(chan struct{})
	s := newSandbox(t, Config{CacheDir: dir, warmMakeGate: gate})
	m, err := s.Load(context.Background(), "samples/bench", wasmOf(t, "samples/bench"), ModuleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	checkfor.Nil(t, 10*time.Second, time.Millisecond, func() error {
		if !m.warming.Load() {
			return errors.New("the background start has not begun to make the first instance")
		}
		return nil
	})
	// Held by the gate, the first instance is not made: a call that waits
	// for it ends at its deadline with none made.
	if o := m.Invoke(context.Background(), orderPlaced(), 500*time.Millisecond); o.Kind != Timeout || m.Stats().Created != 0 {
		t.Fatalf("call while the first instance is made: %v (%s), %d instances; want a timeout and none made", o.Kind, o.Error(), m.Stats().Created)
	}
	done := make(chan Outcome)
	go func() { done <- m.Invoke(context.Background(), orderPlaced(), time.Minute) }()
	close(gate)
	if o := <-done; o.Kind != Success {
		t.Fatalf("call once the gate opened: %v (%s)", o.Kind, o.Error())
	}
	<-m.warmDone
	if st := m.Stats(); st.Created != 1 || st.Idle != 1 {
		t.Fatalf("after the call and the background start: %+v; want one instance, the background start's, idle", st)
	}
}
