package subscription

import (
	"strconv"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/wasm/abi"
)

// InvocationKey returns the key a handler sees for event index of commit c:
// subscription:aggregateType/aggregateId@version:index, the names escaped
// (abi.InvocationKey), so that it is the same on every attempt and no other
// event of any subscription or aggregate has it.
func InvocationKey(subscription string, c eventlog.Commit, index int) string {
	return abi.InvocationKey(subscription, c.AggregateType, c.AggregateID, c.Version, index)
}

// eventKey is InvocationKey of event index of aggregate k at version.
func eventKey(subscription string, k aggKey, version uint64, index uint32) string {
	return abi.InvocationKey(subscription, k.typ, k.id, version, int(index))
}

// legacyInvocationKey is the form keys had before they named the aggregate
// type and escaped the names: subscription:aggregateId@version:index. An
// event that was attempted under it (a record parked, or a budget spent,
// before the upgrade) keeps it, so that a downstream service that has seen
// the key still recognises a retry of the same event.
func legacyInvocationKey(subscription, aggregateID string, version uint64, index int) string {
	b := make([]byte, 0, len(subscription)+len(aggregateID)+24)
	b = append(b, subscription...)
	b = append(b, ':')
	b = append(b, aggregateID...)
	b = append(b, '@')
	b = strconv.AppendUint(b, version, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(index), 10)
	return string(b)
}

// recordKey is the key of the event a parked record stops at: the key it
// stores, or, for a record written before records stored it, the old form
// its event was delivered with.
func recordKey(rec *ledger.Record) string {
	if rec.InvocationKey != "" {
		return rec.InvocationKey
	}
	return legacyInvocationKey(rec.Subscription, rec.AggregateID, rec.Version, int(rec.Index))
}

// pinnedKey is the key an aggregate's replay gives the event it starts at,
// taken from the ledger record it resumes.
type pinnedKey struct {
	version uint64
	index   int
	key     string
}

// keyFor returns the key of event idx of c for aggregate a and remembers it
// in st (a saved budget keeps it): the key of a budget spent on the event
// before a restart, else the key pinned by the record a replay resumes,
// else the event's own.
func (r *run) keyFor(a *aggState, c eventlog.Commit, idx int, st *attempts) string {
	if st.key == "" {
		if p := a.pinned; p.key != "" && p.version == c.Version && p.index == idx {
			st.key = p.key
		} else {
			st.key = InvocationKey(r.s.name, c, idx)
		}
	}
	return st.key
}
