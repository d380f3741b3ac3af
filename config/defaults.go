package config

import (
	"github.com/berthhq/berth/eventlog/jetstream"
	"github.com/berthhq/berth/retry"
)

// Default returns the configuration used for every key the file leaves out, the one [DefaultTOML]
// writes: REST on 127.0.0.1:8080 without tokens, data in ./data, 16 partitions of 4 aggregates, the
// default retry budget of docs/failure-model.md (5 attempts, 100ms doubling up to 5s, 30s each), 10 long-horizon retries from 3m,
// an outage at 3 failing aggregates within 10s, 64MiB per module, no webhooks, info logs as text.
// Each call returns a new Config.
func Default() *Config {
	return &Config{
		Server: ServerConfig{
			Listen:          DefaultListen,
			DataDir:         DefaultDataDir,
			MaxModuleSize:   DefaultMaxModuleSize,
			MaxBodySize:     DefaultMaxBodySize,
			ReadTimeout:     DefaultReadTimeout,
			WriteTimeout:    DefaultWriteTimeout,
			ShutdownTimeout: DefaultShutdownTimeout,
			MemoryLimit:     DefaultHostMemoryLimit,
			OperatorWait:    DefaultOperatorWait,
			AllowedHosts:    []string{},
		},
		Store: StoreConfig{MinFree: DefaultMinFree, ModuleVersions: DefaultModuleVersions,
			ResolvedRetention: DefaultResolvedRetention, AuditRetention: DefaultAuditRetention,
			Backend: BackendBadger, Sync: SyncAlways, JetStream: JetStreamConfig{
				URLs: []string{DefaultNATSURL}, Stream: jetstream.DefaultStream, SubjectPrefix: jetstream.DefaultPrefix,
				Replicas: 1, ConnectTimeout: DefaultNATSConnectTimeout, OpenTimeout: DefaultNATSOpenTimeout,
				PingInterval: DefaultNATSPingInterval, MaxPingsOut: DefaultNATSMaxPingsOut,
				LedgerCompactEvery: DefaultLedgerCompactEvery, LedgerCompactKeep: DefaultLedgerCompactKeep,
			}},
		Cluster: ClusterConfig{LeaseTTL: DefaultLeaseTTL},
		Jobs:    JobsConfig{DefaultRate: DefaultJobRate, MaxRate: DefaultMaxJobRate},
		Tracing: TracingConfig{SampleRatio: DefaultTraceSampleRatio},
		Subscription: SubscriptionConfig{
			Partitions:         DefaultPartitions,
			Concurrency:        DefaultConcurrency,
			CheckpointEvery:    DefaultCheckpointEvery,
			CheckpointInterval: DefaultCheckpointInterval,
			ProjectionWriters:  DefaultProjectionWriters,
			Retry: retry.Config{
				MaxAttempts:          retry.DefaultMaxAttempts,
				InitialBackoff:       retry.Duration(retry.DefaultInitialBackoff),
				MaxBackoff:           retry.Duration(retry.DefaultMaxBackoff),
				Timeout:              retry.Duration(retry.DefaultTimeout),
				Unrecoverable:        []string{},
				Recoverable:          []string{},
				BackpressureAttempts: retry.DefaultBackpressureAttempts,
			},
			Parked: retry.ParkedConfig{
				MaxRetries: retry.DefaultParkedMaxRetries,
				FirstDelay: retry.Duration(retry.DefaultParkedFirstDelay),
				MaxDelay:   retry.Duration(retry.DefaultParkedMaxDelay),
				Timeout:    retry.Duration(retry.DefaultParkedTimeout),
				// An unrecoverable park waits for an operator: no retry fixes it.
				RetryUnrecoverable: new(bool),
			},
			Systemic: SystemicConfig{
				Aggregates: retry.DefaultSystemicAggregates,
				Window:     retry.Duration(retry.DefaultSystemicWindowLength),
			},
		},
		SandboxConfig: SandboxConfig{
			CompiledModules:      DefaultCompiledModules,
			MaxInstances:         DefaultMaxInstances,
			IdleTimeout:          DefaultIdleTimeout,
			RecycleMemoryPercent: DefaultRecycleMemoryPercent,
			RecycleGrowth:        DefaultRecycleGrowth,
			MaxOutput:            DefaultMaxOutput,
			MaxResponse:          DefaultMaxResponse,
			TierUp:               true,
		},
		Capsule: CapsuleConfig{MaxBytes: DefaultCapsuleMaxBytes, RedactHeaders: DefaultCapsuleRedactHeaders(),
			RedactConfig: DefaultCapsuleRedactConfig()},
		Log: LogConfig{Level: "info", Format: "text"},
	}
}

// DefaultTOML returns the commented default configuration file, which the host writes when there is
// none: every key with its default value and a comment above it, and commented-out examples of the
// tables that have no default entries (tokens, per-subscription overrides, classifier rules, modules,
// command gateways, webhooks). It parses to exactly [Default]. Each call returns a new slice.
func DefaultTOML() []byte { return []byte(defaultTOML) }

const defaultTOML = `# Berth host configuration (berth.toml).
#
# Every key below is set to its default; delete a key to keep the default, change it to override.
# Durations are written like 500ms, 2s, 1m 30s or PT2S; sizes like 512KiB, 32MiB, 1GiB or a byte count.
# The reference of every key is docs/config.md. Reload with SIGHUP or POST /v1/config/reload: a bad file
# is refused and the running configuration stays; server.listen, server.data-dir, server.read-timeout,
# server.write-timeout, store.backend, store.jetstream.*, cluster.*, subscription.partitions, .concurrency,
# .checkpoint-every, .checkpoint-interval, subscription.systemic.*, sandbox.*, capsule.* and log.format
# need a restart.

[server]
# Address of the REST API, host:port. Without a token in [[auth.tokens]] it must be a loopback address.
listen = "127.0.0.1:8080"
# Directory of the event log, checkpoints, failure ledger, uploaded modules and compilation cache.
data-dir = "./data"
# Largest .wasm module an upload may send; a larger one is refused with 413.
max-module-size = "32MiB"
# Largest JSON request body; a larger one is refused with 413.
max-body-size = "1MiB"
# How long reading a whole request may take.
read-timeout = "30s"
# How long handling a request and writing its response may take.
write-timeout = "1m"
# How long a stopping host waits for requests, handlers and its stores' last writes; past it, it exits 1.
shutdown-timeout = "15s"
# Soft memory limit of the Go runtime (not compiled module code): near it the garbage collector runs more
# often. Under a cgroup limit the host uses 90 % of it when lower; "0B" turns it off; GOMEMLIMIT wins.
memory-limit = "512MiB"
# How long a resume or skip waits for an aggregate a long-horizon retry is working on; then 409.
operator-wait = "10s"
# More names a request's Host may carry, beside the address served (loopback names on loopback), e.g. a
# reverse proxy's name. Names only, no port; "*" for any. Any other Host is refused (DNS rebinding).
allowed-hosts = []

[store]
# Free space the data directory's filesystem keeps: below it, writes are refused with 507 (reads go on)
# and the host does not start. At least 384MiB (two memtable files and their flushes); "0B" turns it off.
min-free = "512MiB"
# Versions of each module kept for rollback (PUT keeps the old ones), the current one included; 1 keeps none older.
module-versions = 10
# How long a resumed or skipped aggregate's record, with its history, stays queryable (GET /v1/resolved).
resolved-retention = "P7D"
# How long the audit log (GET /v1/audit) keeps an entry.
audit-retention = "P90D"
# Where the event log and the ledger are kept: "badger" (in the data directory) or "jetstream" (NATS
# JetStream streams named after store.jetstream.stream, shared by every host pointed at them: [cluster]).
backend = "badger"
# When the Badger stores fsync: "always" (every acknowledged write is on disk before its answer, so a
# power cut loses nothing acknowledged) or "none" (faster; a power cut loses recent writes, acknowledged
# or not). With backend "jetstream" the NATS servers' sync_interval decides instead.
sync = "always"

# The NATS connection and stream of the event log when store.backend is "jetstream". Every host of one
# deployment names the same stream, subject-prefix and replicas.
[store.jetstream]
# NATS servers to connect to; the client moves to another when one fails.
urls = ["nats://127.0.0.1:4222"]
# A NATS .creds file (user JWT and nkey seed); "" for none.
credentials-file = ""
# A file holding a user nkey seed; "" for none. Not with credentials-file.
nkey-seed-file = ""
# PEM file of the CAs the servers' certificates are checked against; setting it asks for TLS.
tls-ca-file = ""
# Client certificate, PEM, for servers that ask for one; with tls-key-file.
tls-cert-file = ""
# The client certificate's key, PEM.
tls-key-file = ""
# The JetStream stream of the event log.
stream = "BERTH_EVENTS"
# First tokens of every commit's subject, <prefix>.<shard>.<type>.<id>.
subject-prefix = "berth.events"
# NATS servers keeping the stream: 1, or 3 to outlive one server.
replicas = 1
# How long connecting to a server, and each request to NATS, may take.
connect-timeout = "5s"
# How long the host waits at start for NATS to take connections, and for each of its streams and
# buckets while the cluster cannot answer yet (forming, electing leaders, other hosts creating them).
open-timeout = "30s"
# How often the client pings its NATS server.
ping-interval = "2s"
# Pings that may go unanswered before the connection counts as lost and the client moves to another
# server.
max-pings-outstanding = 2
# Transactions past the last compaction point that make a host snapshot the ledger's cache and purge
# its stream before the point; 0 for never.
ledger-compact-every = 100000
# Transactions before a compaction point the purge leaves, for hosts a little behind.
ledger-compact-keep = 10000
# true once every NATS server runs with jetstream { sync_interval: always } (docs/nats/jetstream.conf):
# the host cannot learn it, and otherwise reminds at start that acknowledged writes are only as
# durable as the servers' sync.
servers-sync-confirmed = false

# This host's place among the hosts of one deployment, when store.backend is "jetstream": they share
# the partitions of every subscription, and one of them at a time runs the jobs and the webhooks.
[cluster]
# This host's id: letters, digits, '-' and '_', unique in the deployment, the same across restarts;
# "" for the machine's hostname (other characters made '-').
host-id = ""
# How long a host's membership lasts without a renewal; at least 3s, the same on every host.
lease-ttl = "15s"
# URL the other hosts and operators reach this host's REST API at; "" for http:// and server.listen.
address = ""

# Bearer tokens. With none, the server listens on loopback only and every request is allowed.
# Roles: reader (read), operator (read; resume, skip, pause), deployer (read; modules and events), admin.
# Give the secret literally (token) or by environment variable (token-env), read at load:
#
# [[auth.tokens]]
# name = "ci"
# role = "deployer"
# token-env = "BERTH_CI_TOKEN"
#
# [[auth.tokens]]
# name = "on-call"
# role = "operator"
# token = "a-long-random-secret"

[subscription]
# Partitions each subscription splits the event log into, by aggregate; each runs in order.
partitions = 16
# Aggregates a partition handles at once; backpressure lowers it for a while.
concurrency = 4
# Write a checkpoint after this many handled events...
checkpoint-every = 100
# ...or at least this often while events are handled.
checkpoint-interval = "200ms"
# Projection calls whose writes one transaction of the query store applies together (group commit); more
# wait for the next one. A call never fails because the store is busy.
projection-writers = 64

# The retry budget of every handler, below what a module declares for its processor and handlers.
[subscription.retry]
# Calls in all, at least 1; 1 means no retry.
max-attempts = 5
# The wait after the first failure; each next wait is twice as long.
initial-backoff = "100ms"
# The longest wait between attempts.
max-backoff = "5s"
# How long one attempt may run; a longer one is cancelled and counts as failed.
timeout = "30s"
# Error classes that park the aggregate at once, without a retry.
unrecoverable = []
# Error classes retried within the budget even where they would be taken for an outage.
recoverable = []
# Attempts allowed for backpressure (busy, 429) before the aggregate is parked.
backpressure-attempts = 20

# The long-horizon retries of a parked aggregate.
[subscription.parked]
# Long-horizon retries before the aggregate waits for an operator; -1 for none.
max-retries = 10
# The delay from the park to the first retry; each next delay is twice as long.
first-delay = "3m"
# The longest delay between long-horizon retries.
max-delay = "1h"
# How long one long-horizon attempt may run.
timeout = "2m"
# Give an aggregate parked for an unrecoverable failure these retries too; false: it waits for an operator.
retry-unrecoverable = false

# When failures of a partition are taken for an outage: the partition pauses and retries, and no
# aggregate spends its budget or is parked.
[subscription.systemic]
# Distinct failing aggregates that make an outage, at least 2.
aggregates = 3
# How recent their failures must be.
window = "10s"

# Per-subscription overrides, setting by setting, over what the module declares; the name is
# "Processor.handler", quoted. A setting left out is inherited; an empty list clears the inherited one.
#
# [subscriptions."ShipmentNotifier.onOrderShipped".retry]
# max-attempts = 8
# initial-backoff = "1s"
# max-backoff = "30s"
# timeout = "20s"
# unrecoverable = ["UnknownBuyer"]
# recoverable = ["NotificationTimeout"]
# backpressure-attempts = 40
#
# [subscriptions."ShipmentNotifier.onOrderShipped".parked]
# max-retries = 20
# first-delay = "5m"
# max-delay = "2h"
# timeout = "1m"
# retry-unrecoverable = true

# Application-wide classifier rules: take an error class for recoverable, unrecoverable, systemic or
# backpressure in every handler (a handler's own lists come first).
#
# [[classifier.rules]]
# class = "berth.Timeout"
# as = "unrecoverable"

# Per-module settings, by the name the module was uploaded under. A module without a table gets these
# defaults: memory-limit = "64MiB", allowed-hosts = [], no config values, init-timeout = "10s".
#
# [modules.shipment-notifier]
# memory-limit = "128MiB"
# allowed-hosts = ["notifications.example.com:443"]
# config = { region = "eu-west-1" }
# init-timeout = "10s"

# Command gateways, by target aggregate type: each command a saga derives is POSTed as JSON
# {"requestId", "aggregateType", "aggregateId", "type", "payload"} to the url of its aggregate type, with
# the request id also as the Idempotency-Key header (the same on a redelivery). 2xx accepts the command,
# 409 or 422 rejects it (the saga's OnRejected handler is called), 429 is backpressure, other answers
# fail the attempt. A table without timeout waits 10s; headers are optional.
#
# [commands.Stock]
# url = "https://stock.example.com/commands"
# timeout = "10s"
# headers = { Authorization = "Bearer a-long-random-secret" }

[sandbox]
# Compiled modules kept in memory.
compiled-modules = 32
# Instances of one module, i.e. its concurrent calls; more calls wait for a free instance.
max-instances = 8
# An instance idle this long is released, so a burst of calls does not pin memory.
idle-timeout = "1m"
# An instance whose memory grew to this percentage of its module's memory-limit is closed after its
# call instead of being kept for the next (WebAssembly memory never shrinks); 1 to 100.
recycle-memory-percent = 50
# An instance whose memory grew to this many times its size when it was made is closed after its call
# and replaced (a busy instance never goes idle, and a Go guest's heap creeps up); more than 1, or 0 for
# never.
recycle-growth = 1.25
# What one call may write to stdout and to stderr; the rest is dropped.
max-output = "16KiB"
# Largest body of an outbound HTTP response a guest receives.
max-response = "1MiB"
# true: a module not in the compilation cache starts on the interpreter at once and is compiled in the
# background. Calls on the interpreter run 14-80x slower; one that runs past its timeout there is not
# charged, and is made again once the module runs compiled code. false compiles it first (seconds for a
# Go guest) before the module handles anything.
tier-up = true

# Attempt capsules: the recording of a failed attempt (its event, host calls and their answers, clock
# readings, random bytes and outcome) that the failure ledger keeps and berth parked replay runs again.
[capsule]
# Largest encoded capsule; past it bodies are cut, then later calls, clock readings and random bytes
# left out, and the capsule says what it lacks.
max-bytes = "256KiB"
# HTTP headers, request and response, whose values a capsule stores as "[redacted]" (any case).
redact-headers = ["Authorization", "Cookie", "Proxy-Authorization", "Set-Cookie"]
# Modules' config keys (patterns, any case) whose values a capsule stores as "[redacted]".
redact-config = ["*token*", "*secret*", "*password*", "*passwd*", "*credential*", "*api-key*", "*apikey*", "*private-key*"]

# Webhooks told when an aggregate parks (parked), spends its long-horizon retries (retries-spent), or
# is resumed or skipped by an operator; when a partition pauses for an outage and goes on
# (partition-paused, partition-resumed); when an operator pauses, unpauses or resets a subscription
# (subscription-paused, subscription-unpaused, subscription-reset); when a job ends (job-finished); when a
# failure group opens or reaches 100, 1,000, … records (group-opened, group-grew). Deliveries are queued durably, retried, and signed as Standard
# Webhooks do (webhook-id, webhook-timestamp, webhook-signature) with each "whsec_" secret listed.
#
# [[webhooks]]
# name = "team-orders"
# url = "https://hooks.example.com/berth"
# secrets-env = ["BERTH_WEBHOOK_SECRET"]
# events = ["parked", "retries-spent"]
# subscriptions = ["ShipmentNotifier.onOrderShipped"]
#
# [[webhooks]]
# name = "audit"
# url = "https://audit.example.com/berth"
# secrets = ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2VjcmV0LWtleS1iZWluZy1yb3RhdGVkLW91dA=="]
#
# Deprecated: a raw key (secret or secret-env) also sends the old Berth-Signature header, for this one
# more release; it signs webhook-signature too, as the secret "whsec_" + base64 of the key.
# [[webhooks]]
# name = "legacy"
# url = "https://old.example.com/berth"
# secret = "a-long-random-key"
#
# [[webhooks]]
# name = "legacy-env"
# url = "https://old.example.com/berth-env"
# secret-env = "BERTH_OLD_WEBHOOK_KEY"

[jobs]
# Records a second a bulk resume or skip job acts on unless it asks for another rate: each resume replays
# an aggregate's events through its handler, so keep it gentle on the service an outage just hit.
default-rate = 100.0
# The highest rate a job may ask for.
max-rate = 5000.0

[log]
# The lowest level logged: debug, info, warn or error.
level = "info"
# text (for people) or json (for log collectors).
format = "text"

[tracing]
# OpenTelemetry spans of each delivery and attempt, POSTed over OTLP/HTTP to <otlp-endpoint>/v1/traces.
# Empty: tracing off.
otlp-endpoint = ""
# The share of deliveries traced, from 0 to 1.
sample-ratio = 1.0
`
