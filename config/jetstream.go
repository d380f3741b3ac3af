package config

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/berthhq/berth/eventlog/jetstream"
	"github.com/berthhq/berth/internal/jsapi"
	jsledger "github.com/berthhq/berth/ledger/jetstream"
	"github.com/berthhq/berth/retry"
)

// Store backends, the values of store.backend.
const (
	// BackendBadger keeps the event log in Badger under the data directory (the default).
	BackendBadger = "badger"
	// BackendJetStream keeps the event log and the ledger in NATS JetStream streams ([store.jetstream]),
	// which every host pointed at them shares: cluster mode ([cluster]).
	BackendJetStream = "jetstream"
)

// Defaults of [store.jetstream].
const (
	DefaultNATSURL            = "nats://127.0.0.1:4222"
	DefaultNATSConnectTimeout = retry.Duration(jetstream.DefaultRequestTimeout)
	DefaultNATSOpenTimeout    = retry.Duration(jsapi.DefaultWait)
	// DefaultNATSPingInterval and DefaultNATSMaxPingsOut make a connection to a server that went
	// silent (cut off, paused, its host gone) count as lost within about 6 s: well inside the
	// default lease TTL, so the host moves to another server before its lease runs out. The client's
	// own defaults (2 minutes, 2) would keep it on a dead server for minutes.
	DefaultNATSPingInterval = retry.Duration(2 * time.Second)
	DefaultNATSMaxPingsOut  = 2
	// DefaultLedgerCompactEvery and DefaultLedgerCompactKeep are the ledger stream's compaction
	// (ledger/jetstream's own defaults).
	DefaultLedgerCompactEvery = jsledger.DefaultCompactEvery
	DefaultLedgerCompactKeep  = jsledger.DefaultCompactKeep
)

// JetStreamConfig is [store.jetstream]: the NATS connection and the stream of the event log when
// store.backend is "jetstream". Every host of one deployment names the same stream, prefix and
// replicas. Changing any of it needs a restart.
type JetStreamConfig struct {
	// URLs are the NATS servers to connect to (default ["nats://127.0.0.1:4222"]); the client moves to
	// another when one fails. Schemes nats, tls, ws, wss.
	URLs []string `toml:"urls"`
	// CredentialsFile is a NATS .creds file (a user JWT and its nkey seed); default none.
	CredentialsFile string `toml:"credentials-file"`
	// NkeySeedFile is a file holding a user nkey seed, for servers that authenticate by nkey; default
	// none. Not together with credentials-file.
	NkeySeedFile string `toml:"nkey-seed-file"`
	// TLSCAFile is a PEM file of the CAs the servers' certificates are checked against (default: the
	// system's); setting it asks for TLS.
	TLSCAFile string `toml:"tls-ca-file"`
	// TLSCertFile and TLSKeyFile are the client certificate and its key, PEM, for servers that ask for
	// one (default none); both or neither.
	TLSCertFile string `toml:"tls-cert-file"`
	// TLSKeyFile is the key of TLSCertFile.
	TLSKeyFile string `toml:"tls-key-file"`
	// Stream is the JetStream stream of the event log (default "BERTH_EVENTS").
	Stream string `toml:"stream"`
	// SubjectPrefix starts every commit's subject, <prefix>.<shard>.<type>.<id> (default
	// "berth.events"); no other stream of the account may take these subjects.
	SubjectPrefix string `toml:"subject-prefix"`
	// Replicas is how many NATS servers keep the stream: 1, or 3 to outlive one server (default 1).
	Replicas int `toml:"replicas"`
	// ConnectTimeout bounds connecting to one server, and each request to NATS once connected (default
	// 5s).
	ConnectTimeout retry.Duration `toml:"connect-timeout"`
	// OpenTimeout bounds how long the host waits at start for a NATS server that takes connections, and
	// for each of its JetStream parts (the event
	// log, the ledger, the modules' object store, the membership bucket) while the cluster cannot
	// answer yet — one still forming or electing leaders, or other hosts creating the same streams at
	// the same moment (default 30s). Not catching the ledger's cache up, nor waiting for the host's
	// previous run's membership to expire.
	OpenTimeout retry.Duration `toml:"open-timeout"`
	// PingInterval is how often the client pings its server (default 2s); after MaxPingsOut pings
	// without an answer the connection counts as lost and the client moves to another server. Keep
	// ping-interval × (max-pings-outstanding + 1) under a third of cluster.lease-ttl.
	PingInterval retry.Duration `toml:"ping-interval"`
	// MaxPingsOut is how many pings may go unanswered before the connection counts as lost
	// (default 2; at least 1).
	MaxPingsOut int `toml:"max-pings-outstanding"`
	// LedgerCompactEvery is how many transactions past the last compaction point make a host compact
	// the ledger's stream: snapshot its cache to <stream>_LEDGER_SNAPSHOTS and purge the stream
	// before the point (default 100000; 0: never, and the stream grows for ever).
	LedgerCompactEvery int `toml:"ledger-compact-every"`
	// LedgerCompactKeep is how many transactions before a compaction point the purge leaves, for
	// hosts running a little behind (default 10000; at least 1, fewer than ledger-compact-every).
	LedgerCompactKeep int `toml:"ledger-compact-keep"`
	// ServersSyncConfirmed says the operator has started every NATS server with `jetstream {
	// sync_interval: always }` (default false). A host cannot learn that without the system account,
	// so it reminds at start that acknowledged writes are only as durable as the servers' sync, unless
	// this is true; servers it can see not syncing are warned about either way.
	ServersSyncConfirmed bool `toml:"servers-sync-confirmed"`
}

func (s StoreConfig) validateBackend(p *problems, at keyPath) {
	switch s.Backend {
	case BackendBadger:
	case BackendJetStream:
		s.JetStream.validate(p, at.key("jetstream"))
	default:
		p.add(at.key("backend"), strconv.Quote(s.Backend), "must be %q or %q", BackendBadger, BackendJetStream)
	}
}

func (j JetStreamConfig) validate(p *problems, at keyPath) {
	if len(j.URLs) == 0 {
		p.add(at.key("urls"), "[]", "must name at least one NATS server")
	}
	for i, u := range j.URLs {
		pu, err := url.Parse(u)
		switch {
		case err != nil:
			p.add(at.key("urls").at(i), strconv.Quote(u), "%v", err)
		case pu.Scheme != "nats" && pu.Scheme != "tls" && pu.Scheme != "ws" && pu.Scheme != "wss":
			p.add(at.key("urls").at(i), strconv.Quote(u), "scheme must be nats, tls, ws or wss")
		case pu.Host == "":
			p.add(at.key("urls").at(i), strconv.Quote(u), "has no host")
		}
	}
	if j.CredentialsFile != "" && j.NkeySeedFile != "" {
		p.add(at.key("nkey-seed-file"), strconv.Quote(j.NkeySeedFile), "give credentials-file or nkey-seed-file, not both")
	}
	if (j.TLSCertFile == "") != (j.TLSKeyFile == "") {
		p.add(at.key("tls-cert-file"), strconv.Quote(j.TLSCertFile), "tls-cert-file and tls-key-file go together")
	}
	if err := (jetstream.Options{Stream: j.Stream}).Check(); err != nil {
		p.add(at.key("stream"), strconv.Quote(j.Stream), "%v", err)
	}
	if err := (jetstream.Options{Prefix: j.SubjectPrefix}).Check(); err != nil {
		p.add(at.key("subject-prefix"), strconv.Quote(j.SubjectPrefix), "%v", err)
	}
	if j.Replicas != 1 && j.Replicas != 3 {
		p.add(at.key("replicas"), strconv.Itoa(j.Replicas), "must be 1 or 3")
	}
	positiveDuration(p, at.key("connect-timeout"), j.ConnectTimeout)
	positiveDuration(p, at.key("open-timeout"), j.OpenTimeout)
	positiveDuration(p, at.key("ping-interval"), j.PingInterval)
	if j.MaxPingsOut < 1 {
		p.add(at.key("max-pings-outstanding"), strconv.Itoa(j.MaxPingsOut), "must be at least 1")
	}
	switch {
	case j.LedgerCompactEvery < 0:
		p.add(at.key("ledger-compact-every"), strconv.Itoa(j.LedgerCompactEvery), "must be 0 (never) or more")
	case j.LedgerCompactKeep < 1:
		p.add(at.key("ledger-compact-keep"), strconv.Itoa(j.LedgerCompactKeep), "must be at least 1")
	case j.LedgerCompactEvery > 0 && j.LedgerCompactKeep >= j.LedgerCompactEvery:
		p.add(at.key("ledger-compact-keep"), strconv.Itoa(j.LedgerCompactKeep), "must be less than ledger-compact-every (%d)", j.LedgerCompactEvery)
	}
}

// LedgerCompaction returns ledger/jetstream's CompactEvery and CompactKeep from [store.jetstream]
// (a CompactEvery of -1 for ledger-compact-every 0: never).
func (j JetStreamConfig) LedgerCompaction() (every, keep int) {
	if j.LedgerCompactEvery == 0 {
		return -1, j.LedgerCompactKeep
	}
	return j.LedgerCompactEvery, j.LedgerCompactKeep
}

// EventLogJetStream returns the options of the JetStream event log from [store.jetstream]; the host
// opens it over a connection it makes from the same table.
func (c *Config) EventLogJetStream() jetstream.Options {
	j := c.Store.JetStream
	return jetstream.Options{Stream: j.Stream, Prefix: j.SubjectPrefix, Replicas: j.Replicas,
		RequestTimeout: j.ConnectTimeout.Std()}
}

// String names the backend for logs: "badger", or "jetstream (stream S on URLS)".
func (s StoreConfig) String() string {
	if s.Backend != BackendJetStream {
		return s.Backend
	}
	return fmt.Sprintf("jetstream (stream %s, R%d, on %v)", s.JetStream.Stream, s.JetStream.Replicas, s.JetStream.URLs)
}
