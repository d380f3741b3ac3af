package ledger

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
)

// Key layout. Every key starts with one byte naming its kind; names inside
// keys are length-prefixed (lp: uvarint length, then the bytes), so a
// subscription, aggregate type or id may hold any byte without two records
// sharing a key or a key prefix.
//
//	'c' lp(subscription)                              -> checkpoint(8)
//	'q' lp(subscription) partition(4)                 -> partition checkpoint(8)
//	'o' lp(subscription) partition(4)                 -> owner epoch(8) host
//	'y' lp(duty)                                      -> holder epoch(8) host
//	'j' id(8)                                         -> Job as JSON
//	'x' "job-seq"                                     -> last job id(8)
//	'u' seq(8)                                        -> AuditEntry as JSON
//	'x' "audit-seq"                                   -> last audit seq(8)
//	'h' lp(subscription) lp(aggType) lp(aggID) seq(8) -> Resolved as JSON
//	'w' resolvedAt(8) seq(8)                          -> its 'h' key
//	'x' "resolved-seq"                                -> last resolved seq(8)
//	'm' lp(subscription) lp(key)                      -> meta value
//	'r' lp(subscription) lp(aggType) lp(aggID)        -> Record as JSON
//	'e' lp(subscription) lp(aggType) lp(aggID)        -> its attempt capsule (or its latest resolved record's)
//	'v' lp(subscription) lp(aggType) lp(aggID) seq(8) -> the capsule of 'h' (same body)
//	'k' lp(subscription) lp(state)                    -> count(8)
//	'i' lp(subscription) path …                       -> a parked record's summary (index.go)
//	'l' lp(subscription) dim lp(value) lp(state)      -> count(8) per class and aggregate type (index.go)
//	'f' lp(subscription) lp(group) lp(sha256)         -> a candidate's Proof on a failure group (proof.go)
//	'F' lp(subscription) lp(group) lp(sha256) lp(aggType) lp(aggID) -> "" (the proof's handled aggregates)
//	'n' seq(8)                                        -> Notification as JSON
//	'x' "notify-seq"                                  -> last seq(8)
//	'x' "format"                                      -> layout version(1)
//	'g' lp(subscription)                              -> read model generation(8)
//	'p' lp(subscription) gen(8) key                   -> read model value
//	'a' lp(subscription) gen(8) lp(aggType) lp(aggID) -> applied version(8) index(4)
//	'z' lp(subscription) gen(8)                       -> "" (a retired generation)
//
// A projection's read model keys are raw after the generation, so that a
// prefix of them is a prefix of the store's keys. ClearProjection bumps the
// generation (absent: 0) and lists the old one under 'z'; readers only ever
// see the current generation, and SweepProjections deletes retired ones in
// bounded transactions.
//
// Numbers are big endian so byte order is numeric order. PutParked and
// DeleteParked keep the per-state counts in step with the records in the
// same transaction.
//
// A record's attempt capsule (PutCapsule) lives under 'e' beside its 'r'
// key, apart from the record's JSON so that the records' reads and lists
// never load it. DeleteParked leaves it there, the capsule of the latest
// resolved record; a record parked anew moves it to 'v' under the body of
// that resolved record's 'h' key (capsule.go), and SweepResolved deletes
// it with that 'h' entry.
//
// Stores written before the engine kept its retry schedule in memory alone
// hold a due index under 'd' (NextRetry, then the record key, per retrying
// record); nothing reads it, and Open deletes it (dropRetiredDue).
const (
	kindCheckpoint = 'c'
	kindPartition  = 'q'
	kindOwner      = 'o'
	kindDuty       = 'y'
	kindJob        = 'j'
	kindAudit      = 'u'
	kindResolved   = 'h'
	// kindResolvedTime orders resolved records by resolution time, for the
	// retention sweep.
	kindResolvedTime = 'w'
	kindMeta         = 'm'
	kindRecord       = 'r'
	kindCapsule      = 'e'
	// kindResolvedCapsule keeps a resolved record's capsule under its 'h'
	// key's body.
	kindResolvedCapsule = 'v'
	kindRetiredDue      = 'd' // only in older stores; Open deletes it
	kindCount           = 'k'
	kindNotice          = 'n'
	kindSystem          = 'x'
	kindGeneration      = 'g'
	kindProjection      = 'p'
	kindApplied         = 'a'
	kindRetired         = 'z'
)

// layoutVersion is stored under formatKey; Open refuses another.
const layoutVersion = 1

func formatKey() []byte    { return []byte("xformat") }
func notifySeqKey() []byte { return []byte("xnotify-seq") }

func appendLP(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// key builds a key of kind from length-prefixed parts.
func key(kind byte, parts ...string) []byte {
	n := 1
	for _, p := range parts {
		n += binary.MaxVarintLen32 + len(p)
	}
	b := make([]byte, 1, n)
	b[0] = kind
	for _, p := range parts {
		b = appendLP(b, p)
	}
	return b
}

func recordKey(subscription, aggregateType, aggregateID string) []byte {
	return key(kindRecord, subscription, aggregateType, aggregateID)
}

var errBadKey = errors.New("ledger: malformed key")

// splitLP splits a key body into its length-prefixed parts.
func splitLP(b []byte) ([]string, error) {
	var parts []string
	for len(b) > 0 {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return nil, errBadKey
		}
		parts = append(parts, string(b[w:w+int(n)]))
		b = b[w+int(n):]
	}
	return parts, nil
}

// parseRecordKey returns the subscription, aggregate type and id of a record
// key.
func parseRecordKey(k []byte) (sub, aggType, aggID string, err error) {
	if len(k) == 0 || k[0] != kindRecord {
		return "", "", "", errBadKey
	}
	parts, err := splitLP(k[1:])
	if err != nil || len(parts) != 3 {
		return "", "", "", errBadKey
	}
	return parts[0], parts[1], parts[2], nil
}

// Cursor returns the ListParked cursor that continues after the record of
// (subscription, aggregateType, aggregateID), as a page ending on it would.
func Cursor(subscription, aggregateType, aggregateID string) string {
	return base64.RawURLEncoding.EncodeToString(recordKey(subscription, aggregateType, aggregateID))
}

func noticeKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{kindNotice}, seq)
}

func partitionKey(subscription string, partition int) []byte {
	return binary.BigEndian.AppendUint32(key(kindPartition, subscription), uint32(partition))
}

func ownerKey(subscription string, partition int) []byte {
	return binary.BigEndian.AppendUint32(key(kindOwner, subscription), uint32(partition))
}
