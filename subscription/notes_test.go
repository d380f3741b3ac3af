package subscription

import (
	"fmt"
	"time"

	"github.com/berthhq/berth/ledger"
)

// noteLine is a notification of a partition or a subscription, as the
// tests compare them.
func noteLine(n ledger.Notification) string {
	s := n.Type
	if n.Partition != nil {
		s += fmt.Sprintf(" partition %d", *n.Partition)
	}
	if n.Until != nil {
		s += " until " + n.Until.UTC().Format(time.RFC3339)
	}
	if n.Position != 0 {
		s += fmt.Sprintf(" position %d", n.Position)
	}
	if n.Actor != "" || n.Reason != "" {
		s += fmt.Sprintf(" by %q: %q", n.Actor, n.Reason)
	}
	return s
}

// otherNotes returns the queued notifications of partitions and of
// operators' changes to subscriptions, as noteLine writes them (not
// those of failure groups, which the ledger's tests cover).
func (e *env) otherNotes() []string {
	var out []string
	for _, n := range e.allNotifications() {
		if n.AggregateType == "" && n.Group == "" {
			if n.Subscription != sub {
				e.t.Errorf("notification %+v names subscription %q", n, n.Subscription)
			}
			out = append(out, noteLine(n))
		}
	}
	return out
}
