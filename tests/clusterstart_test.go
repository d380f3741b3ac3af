package tests

import (
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/natstest"
)

// TestThreeHostsStartTogether: the README's walkthrough as a user runs it —
// three built hosts started at the same moment on a three-node NATS cluster
// that has no Berth streams yet (replicas 3), its servers syncing every
// write as the walkthrough's docs/nats/jetstream.conf has them. Each creates the event log,
// the ledger, the modules' object store and the membership bucket, or finds
// another host creating them; NATS answers only one of several identical
// creates, and the streams' leaders are elected meanwhile. Every host must
// serve, see the other two, share a subscription uploaded on one of them,
// and deliver what is appended on any of them.
func TestThreeHostsStartTogether(t *testing.T) {
	nc := natstest.RunClusterWith(t, 3, natstest.SyncAlways)
	svc := newNotifier(t)
	hosts := make([]*hostProc, 3)
	for i := range hosts {
		data := t.TempDir()
		path := filepath.Join(data, "berth.toml")
		writeFile(t, path, hostConfig{NotifyURL: svc.URL(), Extra: clusterConfig(nc.URLs(), i) + fastRetry}.TOML())
		hosts[i] = spawnHost(t, data, path, "serve", "--config", path, "--data", data, "--listen", "127.0.0.1:0")
	}
	for i, h := range hosts {
		if err := h.awaitServing(60 * time.Second); err != nil {
			t.Fatalf("host-%d: %v", i, err)
		}
	}
	all := []string{"host-0", "host-1", "host-2"}
	for i, h := range hosts {
		checkfor.Within(t, 30*time.Second, func() error {
			r := h.request("GET", "/v1/cluster", nil)
			var v clusterView
			if r.Status != 200 {
				return fmt.Errorf("host-%d: GET /v1/cluster: %s", i, r)
			}
			r.JSON(t, &v)
			if len(v.Hosts) != 3 {
				return fmt.Errorf("host-%d sees %d hosts, want 3: %s", i, len(v.Hosts), r.Body)
			}
			return nil
		})
	}

	hosts[2].uploadNotifier(t, 201)
	checkfor.Within(t, 30*time.Second, func() error { return allOwnedBy(hosts, []string{subName}, all...) })
	for i := range 12 {
		hosts[i%3].appendShipped(t, fmt.Sprintf("start-%02d", i), fmt.Sprintf("buyer-%d", i%4))
	}
	checkfor.Within(t, 30*time.Second, func() error {
		seen := map[string]bool{}
		for _, c := range svc.callsOf("") {
			if c.Status == http.StatusAccepted {
				seen[c.Order] = true
			}
		}
		if len(seen) != 12 {
			return fmt.Errorf("%d orders notified, want 12: %v", len(seen), seen)
		}
		return nil
	})
	for i, h := range hosts {
		if s := h.Stderr(); strings.Contains(s, "NATS connection lost") || strings.Contains(s, "level=ERROR") {
			t.Errorf("host-%d logged a lost connection or an error while starting:\n%s", i, s)
		}
	}
}
