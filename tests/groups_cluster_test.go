package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
)

// groupHook is a webhook receiver of group-opened and group-grew. A
// delivery is at least once (one cut off by a SIGKILL comes again): it
// keeps one of each id, as a receiver does.
type groupHook struct {
	*httptest.Server
	mu    sync.Mutex
	heard []string // "type group count", in the order heard
	ids   map[string]bool
}

func newGroupHook(t testing.TB) *groupHook {
	g := &groupHook{ids: map[string]bool{}}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p struct {
			ID    string `json:"id"`
			Type  string `json:"type"`
			Group string `json:"group"`
			Count int    `json:"count"`
		}
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &p)
		g.mu.Lock()
		if !g.ids[p.ID] {
			g.ids[p.ID] = true
			g.heard = append(g.heard, fmt.Sprintf("%s %s %d", p.Type, p.Group, p.Count))
		}
		g.mu.Unlock()
	}))
	t.Cleanup(g.Close)
	return g
}

// config is the TOML of a webhook to g.
func (g *groupHook) config() string {
	return fmt.Sprintf(`
[[webhooks]]
name = "groups"
url = %q
events = ["group-opened", "group-grew"]
`, g.URL)
}

// sorted returns what g heard, sorted.
func (g *groupHook) sorted() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Sorted(slices.Values(g.heard))
}

// waitHeard waits until g heard as many deliveries as want holds, then
// checks it heard exactly want.
func (g *groupHook) waitHeard(t testing.TB, want []string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	checkfor.Within(t, 30*time.Second, func() error {
		if n := len(g.sorted()); n < len(want) {
			return fmt.Errorf("the hook heard %v, want %d deliveries", g.sorted(), len(want))
		}
		return nil
	})
	if got := g.sorted(); !slices.Equal(got, want) {
		t.Errorf("the hook heard\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// setCauses has svc fail the buyers of the three causes of the group
// tests: ghost-0… are unknown (404), down-0… answered 503, slow-0…
// answered past the attempt's timeout.
func setCauses(svc *notifier, ghosts, down, slow int) {
	for i := range ghosts {
		svc.set(fmt.Sprintf("ghost-%d", i), behaviour{Unknown: true})
	}
	for i := range down {
		svc.set(fmt.Sprintf("down-%d", i), behaviour{Fail: 1 << 30})
	}
	for i := range slow {
		svc.set(fmt.Sprintf("slow-%d", i), behaviour{Delay: 5 * time.Second})
	}
}

// TestFailureGroupsOnThreeHosts: three built hosts on a three-node NATS
// cluster share one ledger. Parks for three causes — unknown buyers of
// varied ids, a service answering 503, one too slow — appended through
// all three hosts and parked by whichever owns each aggregate, read as
// exactly three groups with exact counts on every host, also once a host
// is SIGKILLed; the webhook hears group-opened once per group and
// group-grew once at 100, whichever host parked the record that opened or
// grew it.
func TestFailureGroupsOnThreeHosts(t *testing.T) {
	const ghosts, down, slow = 100, 30, 3
	nc := natstest.RunCluster(t, 3)
	hook := newGroupHook(t)
	svc := newNotifier(t)
	setCauses(svc, ghosts, down, slow)
	hosts := make([]*hostProc, 3)
	for i := range hosts {
		hosts[i] = newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: clusterConfig(nc.URLs(), i) + groupsConfig + hook.config()})
	}
	hosts[0].uploadNotifier(t, 201)
	all := []string{"host-0", "host-1", "host-2"}
	checkfor.Within(t, 30*time.Second, func() error { return allOwnedBy(hosts, []string{subName}, all...) })

	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := w; i < ghosts+down; i += 6 {
				buyer := fmt.Sprintf("ghost-%d", i)
				if i >= ghosts {
					buyer = fmt.Sprintf("down-%d", i-ghosts)
				}
				hosts[i%3].appendShipped(t, "o-"+buyer, buyer)
			}
		})
	}
	wg.Wait()
	checkfor.Within(t, 45*time.Second, func() error { return groupsAre(hosts[1].groups(t), ghosts, down) })
	for i := range slow {
		buyer := fmt.Sprintf("slow-%d", i)
		hosts[i%3].appendShipped(t, "o-"+buyer, buyer)
		hosts[i%3].waitParked(t, "o-"+buyer, 30*time.Second)
	}
	for _, h := range hosts {
		checkfor.Within(t, 10*time.Second, func() error { return groupsAre(h.groups(t), ghosts, down, slow) })
	}
	gs := hosts[0].groups(t)
	if gs[0].Message != "the notification service does not know buyer {}" || gs[2].Classes[0] != "berth.Timeout" {
		t.Errorf("groups %+v", gs)
	}
	hook.waitHeard(t, []string{"group-opened " + gs[0].Group + " 1", "group-grew " + gs[0].Group + " 100",
		"group-opened " + gs[1].Group + " 1", "group-opened " + gs[2].Group + " 1"})

	hosts[2].Kill()
	for _, h := range hosts[:2] {
		if err := groupsAre(h.groups(t), ghosts, down, slow); err != nil {
			t.Errorf("%s after host-2's SIGKILL: %v", h.URL, err)
		}
	}
}
