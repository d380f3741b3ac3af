package assembly_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/internal/testing/syncbuf"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// A host says at start how durable the NATS servers' acknowledgements are:
// a warning naming each server that does not fsync before it acknowledges,
// when its account may ask the system account's JSZ; a reminder when it may
// not, unless the operator confirmed the servers' setting.

// jszForHost returns a server option that puts the host's nkey user in an
// account with JetStream that imports the system account's JSZ, as an
// operator lets a host check its servers, and the nkey seed file the host
// connects with.
func jszForHost(t *testing.T) (mutate func(*server.Options), seedFile string) {
	t.Helper()
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	dir := t.TempDir()
	seedFile = filepath.Join(dir, "host.nk")
	conf := filepath.Join(dir, "accounts.conf")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, fmt.Appendf(nil, `
accounts {
  SYS { users: [{user: sys, password: sys}], exports: [{service: "$SYS.REQ.SERVER.PING.JSZ", response: stream}] }
  APP { jetstream: enabled, users: [{nkey: %s}], imports: [{service: {account: SYS, subject: "$SYS.REQ.SERVER.PING.JSZ"}}] }
}
system_account: SYS
`, pub), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(o *server.Options) {
		if err := o.ProcessConfigFile(conf); err != nil {
			t.Fatalf("accounts.conf: %v", err)
		}
	}, seedFile
}

// openLogged opens a host over cfg and returns what it logged at start.
func openLogged(t *testing.T, cfg *config.Config) string {
	t.Helper()
	var log syncbuf.Buffer
	open(t, cfg, assembly.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	return log.String()
}

// lines returns the lines of log that contain s.
func lines(log, s string) []string {
	var out []string
	for l := range strings.Lines(log) {
		if strings.Contains(l, s) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

const (
	laxLine      = "NATS servers acknowledge JetStream writes before they fsync them"
	syncedLine   = "NATS servers fsync every JetStream write"
	reminderLine = "acknowledged writes are only as durable as the NATS servers' jetstream sync_interval"
)

func TestServersSyncSaidAtStart(t *testing.T) {
	t.Run("a cluster on NATS's default sync is warned about, each server named", func(t *testing.T) {
		mutate, seed := jszForHost(t)
		c := natstest.RunClusterWith(t, 3, mutate)
		cfg := jetStreamHost(t, c.URLs())
		cfg.Store.JetStream.NkeySeedFile = seed
		cfg.Store.JetStream.ServersSyncConfirmed = true // what the servers say beats what the file says
		log := openLogged(t, cfg)
		warned := lines(log, laxLine)
		if len(warned) != 1 || !strings.Contains(warned[0], "level=WARN") {
			t.Fatalf("want one WARN line %q; log:\n%s", laxLine, log)
		}
		for _, n := range c.Nodes {
			if want := n.Name() + " (sync_interval 2m0s)"; !strings.Contains(warned[0], want) {
				t.Errorf("the warning does not name %q: %s", want, warned[0])
			}
		}
		if got := lines(log, reminderLine); len(got) != 0 {
			t.Errorf("a reminder beside the warning: %q", got)
		}
	})
	t.Run("servers that sync every write are said to", func(t *testing.T) {
		mutate, seed := jszForHost(t)
		n := natstest.RunServerWith(t, func(o *server.Options) { mutate(o); natstest.SyncAlways(o) })
		cfg := jetStreamHost(t, n.URL())
		cfg.Store.JetStream.NkeySeedFile = seed
		log := openLogged(t, cfg)
		if got := lines(log, syncedLine); len(got) != 1 || !strings.Contains(got[0], "servers="+n.Name()) {
			t.Fatalf("want one line %q naming %s; log:\n%s", syncedLine, n.Name(), log)
		}
		if got := append(lines(log, laxLine), lines(log, reminderLine)...); len(got) != 0 {
			t.Errorf("servers that sync, yet: %q", got)
		}
	})
	t.Run("servers the host cannot ask get a reminder, unless confirmed", func(t *testing.T) {
		n := natstest.RunServer(t)
		cfg := jetStreamHost(t, n.URL())
		log := openLogged(t, cfg)
		if got := lines(log, reminderLine); len(got) != 1 || !strings.Contains(got[0], "servers-sync-confirmed") {
			t.Fatalf("want one reminder %q naming the key; log:\n%s", reminderLine, log)
		}
		if got := lines(log, laxLine); len(got) != 0 {
			t.Errorf("a warning without an answer: %q", got)
		}
		cfg = jetStreamHost(t, n.URL())
		cfg.Store.JetStream.ServersSyncConfirmed = true
		cfg.Cluster.HostID = "h2" // beside the first host, still open
		log = openLogged(t, cfg)
		if got := append(lines(log, reminderLine), lines(log, laxLine)...); len(got) != 0 {
			t.Errorf("confirmed, yet: %q", got)
		}
	})
}
