package jetstream

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"

	"github.com/berthhq/berth/eventlog"
)

// Shards is the number of shards in commit subjects. A commit of aggregate
// (type, id) is published on
//
//	<prefix>.<shard>.<type token>.<id token>
//
// where shard is eventlog.PartitionOf(type, id, Shards) in decimal (0 to
// 255). Since PartitionOf among n is PartitionOf among Shards mod n whenever
// n divides Shards, a subscription with 1, 2, 4 … 256 partitions can select
// one partition's commits by subject. Shards is part of the stored format:
// changing it needs a new stream.
const Shards = 256

// maxPlainName is the longest name (in bytes) whose token is its own
// encoding; a longer one is named by its hash, so that a subject stays far
// below NATS's control-line limit (4 KiB by default) for any name up to
// eventlog.MaxNameLen.
const maxPlainName = 48

// token is the subject token of an aggregate type or id: its base64url
// encoding without padding (any byte is allowed in a name — dots, slashes,
// spaces, '*', '>' — and the token holds only [A-Za-z0-9_-]), or, for a name
// longer than maxPlainName bytes, '~' and the base64url SHA-256 of it. The
// two forms never meet ('~' is outside base64url), and the commit itself
// names its aggregate in full: a read checks it, so even a hash collision
// could not mix two aggregates unnoticed.
func token(name string) string {
	if len(name) <= maxPlainName {
		return base64.RawURLEncoding.EncodeToString([]byte(name))
	}
	sum := sha256.Sum256([]byte(name))
	return "~" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// subjectOf returns the subject of an aggregate's commits under prefix.
func subjectOf(prefix, aggregateType, aggregateID string) string {
	shard := eventlog.PartitionOf(aggregateType, aggregateID, Shards)
	return prefix + "." + strconv.Itoa(shard) + "." + token(aggregateType) + "." + token(aggregateID)
}

// allSubjects is the stream's subject filter under prefix.
func allSubjects(prefix string) string { return prefix + ".>" }
