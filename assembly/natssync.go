package assembly

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/berthhq/berth/config"
	"github.com/nats-io/nats.go"
)

// A NATS server acknowledges a JetStream write before it fsyncs it unless it runs with
// `jetstream { sync_interval: always }`; by default it syncs every two minutes, and a power cut
// loses what it acknowledged. A client learns a server's setting only from the system account
// (JSZ, VARZ and STATSZ carry it; the server's INFO, the JetStream API's account info and a
// stream's info do not), so a host asks once at start, and says what it learnt or that it could not.

// serversSyncSubject asks every server of the cluster for its JetStream state, the config with its
// sync_interval included. Only the system account answers it, or an account that imports it from
// the system account.
const serversSyncSubject = "$SYS.REQ.SERVER.PING.JSZ"

// serversSyncWait bounds asking the servers, so that a host whose publish to $SYS is refused (a
// permissions violation is not answered) waits no longer than that at start.
const serversSyncWait = 2 * time.Second

// serversSyncGap is how long the host waits for one more server after the last answer, when fewer
// answered than it knows of (a server down, or one the client's list still names). A server on a
// loaded machine answered more than 250 ms after the others (a CI run that named two servers of
// three), so the gap is most of serversSyncWait: a start with a server down waits that much more.
const serversSyncGap = time.Second

// serverSync is what one server said of how it syncs JetStream writes.
type serverSync struct {
	name     string
	always   bool
	interval time.Duration
}

// askServersSync asks the servers how they sync JetStream writes. ok is false when none answered:
// the host's account cannot reach the system account's JSZ (the usual case) or it was refused.
func askServersSync(nc *nats.Conn, wait time.Duration) (servers []serverSync, ok bool) {
	sub, err := nc.SubscribeSync(nc.NewInbox())
	if err != nil {
		return nil, false
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(serversSyncSubject, sub.Subject, nil); err != nil {
		return nil, false
	}
	// The client knows the cluster's servers from their INFO; once that many have answered there is
	// nothing more to wait for.
	known, answered := len(nc.Servers()), 0
	end := time.Now().Add(wait)
	for answered < known {
		left := time.Until(end)
		if answered > 0 {
			left = min(left, serversSyncGap)
		}
		if left <= 0 {
			break
		}
		m, err := sub.NextMsg(left)
		if errors.Is(err, nats.ErrNoResponders) { // nothing in the host's account answers $SYS
			return nil, false
		}
		if err != nil {
			break
		}
		answered++
		var r struct {
			Server struct {
				Name string `json:"name"`
			} `json:"server"`
			Data *struct {
				Disabled bool `json:"disabled"`
				Config   struct {
					SyncInterval time.Duration `json:"sync_interval"`
					SyncAlways   bool          `json:"sync_always"`
				} `json:"config"`
			} `json:"data"`
		}
		if json.Unmarshal(m.Data, &r) != nil || r.Data == nil || r.Data.Disabled {
			continue // a server without JetStream keeps none of the host's data
		}
		servers = append(servers, serverSync{name: r.Server.Name, always: r.Data.Config.SyncAlways,
			interval: r.Data.Config.SyncInterval})
	}
	return servers, len(servers) > 0
}

// checkServersSync logs once, at start, how durable the servers' acknowledgements are: a warning
// naming each server that does not fsync before it acknowledges, and its sync_interval; or, when
// the servers cannot be asked, a reminder, unless store.jetstream.servers-sync-confirmed says the
// operator has seen to it.
func checkServersSync(nc *nats.Conn, j config.JetStreamConfig, log *slog.Logger) {
	servers, ok := askServersSync(nc, min(j.ConnectTimeout.Std(), serversSyncWait))
	if !ok {
		if !j.ServersSyncConfirmed {
			log.Info("acknowledged writes are only as durable as the NATS servers' jetstream sync_interval, " +
				"which this host cannot ask without the system account (" + serversSyncSubject + "): " +
				"run them with sync_interval: always (docs/nats/jetstream.conf), " +
				"then set store.jetstream.servers-sync-confirmed = true")
		}
		return
	}
	var lax, all []string
	for _, s := range servers {
		all = append(all, s.name)
		if !s.always {
			lax = append(lax, s.name+" (sync_interval "+s.interval.String()+")")
		}
	}
	if len(lax) > 0 {
		log.Warn("NATS servers acknowledge JetStream writes before they fsync them: a power cut can lose "+
			"appends, parks and operator actions this host acknowledged; run them with "+
			"jetstream { sync_interval: always } (docs/nats/jetstream.conf)",
			"servers", strings.Join(lax, ", "))
		return
	}
	log.Info("NATS servers fsync every JetStream write before they acknowledge it (sync_interval: always)",
		"servers", strings.Join(all, ", "))
}
