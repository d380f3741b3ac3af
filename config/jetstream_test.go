package config

import (
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog/jetstream"
)

func TestStoreBackend(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string // each a prefix of one error, in order; none: valid
	}{
		{"default is badger", "", nil},
		{"jetstream with defaults", "[store]\nbackend = \"jetstream\"\n", nil},
		{"jetstream table ignored for badger", "[store.jetstream]\nreplicas = 2\n", nil},
		{"unknown backend", "[store]\nbackend = \"etcd\"\n",
			[]string{`berth.toml:2: store.backend: "etcd": must be "badger" or "jetstream"`}},
		{"every jetstream problem", `[store]
backend = "jetstream"
[store.jetstream]
urls = ["nats://a:4222", "http://b:4222", "nats://"]
credentials-file = "u.creds"
nkey-seed-file = "u.nk"
tls-cert-file = "c.pem"
stream = "A.B"
subject-prefix = "berth.>"
replicas = 2
connect-timeout = "0s"
open-timeout = "-1s"
ledger-compact-every = -1
`, []string{
			`berth.toml:4: store.jetstream.urls[1]: "http://b:4222": scheme must be nats, tls, ws or wss`,
			`berth.toml:4: store.jetstream.urls[2]: "nats://": has no host`,
			`berth.toml:6: store.jetstream.nkey-seed-file: "u.nk": give credentials-file or nkey-seed-file, not both`,
			`berth.toml:7: store.jetstream.tls-cert-file: "c.pem": tls-cert-file and tls-key-file go together`,
			`berth.toml:8: store.jetstream.stream: "A.B": stream name "A.B" holds`,
			`berth.toml:9: store.jetstream.subject-prefix: "berth.>": subject prefix "berth.>" is not`,
			`berth.toml:10: store.jetstream.replicas: 2: must be 1 or 3`,
			`berth.toml:11: store.jetstream.connect-timeout: "0s": must be more than 0`,
			`berth.toml:12: store.jetstream.open-timeout: "-1s": must not be negative`,
			`berth.toml:13: store.jetstream.ledger-compact-every: -1: must be 0 (never) or more`,
		}},
		{"compaction keeps fewer than it compacts", "[store]\nbackend = \"jetstream\"\n[store.jetstream]\nledger-compact-every = 100\nledger-compact-keep = 100\n",
			[]string{`berth.toml:5: store.jetstream.ledger-compact-keep: 100: must be less than ledger-compact-every (100)`}},
		{"compaction keeps something", "[store]\nbackend = \"jetstream\"\n[store.jetstream]\nledger-compact-keep = 0\n",
			[]string{`berth.toml:4: store.jetstream.ledger-compact-keep: 0: must be at least 1`}},
		{"never compacting keeps any number", "[store]\nbackend = \"jetstream\"\n[store.jetstream]\nledger-compact-every = 0\nledger-compact-keep = 200000\n", nil},
		{"no urls", "[store]\nbackend = \"jetstream\"\n[store.jetstream]\nurls = []\n",
			[]string{`berth.toml:4: store.jetstream.urls: []: must name at least one NATS server`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantErrors(t, tc.text, tc.want) })
	}
}

// wantErrors parses text as berth.toml and checks its errors: one per
// want, in order, each starting with it; none when want is empty.
func wantErrors(t *testing.T, text string, want []string) {
	t.Helper()
	_, err := Parse([]byte(text), "berth.toml")
	errs := Errors(err)
	if len(errs) != len(want) || (err != nil) != (len(want) > 0) {
		t.Fatalf("got %d errors (%v), want %d", len(errs), err, len(want))
	}
	for i, e := range errs {
		if !strings.HasPrefix(e.Error(), want[i]) {
			t.Errorf("error %d = %q, want prefix %q", i, e.Error(), want[i])
		}
	}
}

func TestEventLogJetStream(t *testing.T) {
	c, err := Parse([]byte("[store]\nbackend = \"jetstream\"\n[store.jetstream]\nstream = \"S\"\nsubject-prefix = \"p.q\"\nreplicas = 3\nconnect-timeout = \"2s\"\n"), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := jetstream.Options{Stream: "S", Prefix: "p.q", Replicas: 3, RequestTimeout: 2 * time.Second}
	if got := c.EventLogJetStream(); got != want {
		t.Fatalf("EventLogJetStream() = %+v, want %+v", got, want)
	}
	for _, k := range []string{"store.backend", "store.jetstream.urls", "store.jetstream.replicas", "store.jetstream.open-timeout"} {
		if !NeedsRestart(k) {
			t.Errorf("NeedsRestart(%s) = false", k)
		}
	}
}
