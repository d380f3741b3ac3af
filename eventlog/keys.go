package eventlog

import (
	"encoding/binary"

	"github.com/berthhq/berth/internal/lpcodec"
)

// Key layout. Every key starts with one byte naming its kind; names inside
// keys are length-prefixed (uvarint length, then the bytes), so an aggregate
// type or id may hold any byte, including the separators another layout
// would use, without two aggregates ever sharing a key or a key prefix.
//
//	'p' position(8, big endian)                       -> encoded commit (codec.go)
//	'a' lp(aggregateType) lp(aggregateID) version(8)  -> position(8)
//	'v' lp(aggregateType) lp(aggregateID)             -> current version(8)
//	'm' "format"                                      -> layout version(1)
//
// Big-endian numbers make Badger's byte order the numeric order, so a
// forward scan of 'p' reads the log in position order and a scan of one
// aggregate's 'a' prefix reads its commits in version order.
const (
	kindPosition  = 'p'
	kindAggregate = 'a'
	kindVersion   = 'v'
	kindMeta      = 'm'
)

// layoutVersion is stored under formatKey; Open refuses a directory written
// with another layout.
const layoutVersion = 1

var formatKey = []byte{kindMeta, 'f', 'o', 'r', 'm', 'a', 't'}

func positionKey(pos uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{kindPosition}, pos)
}

// aggregatePrefix is the prefix of every 'a' key of one aggregate.
func aggregatePrefix(aggregateType, aggregateID string) []byte {
	b := make([]byte, 0, 1+2*binary.MaxVarintLen16+len(aggregateType)+len(aggregateID)+8)
	b = append(b, kindAggregate)
	b = lpcodec.AppendLP(b, aggregateType)
	return lpcodec.AppendLP(b, aggregateID)
}

func aggregateKey(aggregateType, aggregateID string, version uint64) []byte {
	return binary.BigEndian.AppendUint64(aggregatePrefix(aggregateType, aggregateID), version)
}

func versionKey(aggregateType, aggregateID string) []byte {
	b := make([]byte, 0, 1+2*binary.MaxVarintLen16+len(aggregateType)+len(aggregateID))
	b = append(b, kindVersion)
	b = lpcodec.AppendLP(b, aggregateType)
	return lpcodec.AppendLP(b, aggregateID)
}
