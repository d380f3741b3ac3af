package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/berthhq/berth/internal/jsapi"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// memberInfo is the value of a host's key in the membership bucket. Its JSON
// is the deployment's wire format between hosts: add fields, never rename.
type memberInfo struct {
	Address string    `json:"address,omitempty"`
	Version string    `json:"version,omitempty"`
	Started time.Time `json:"started"`
	// Incarnation is random per Open: a renewal whose ack was lost finds
	// its own write by it (see lease.renew), and a second process with the
	// same host id is told apart from this one.
	Incarnation string `json:"incarnation"`
	// Releases counts this host's releases of partitions; a change tells
	// the others to look at the ledger now rather than at their next tick.
	Releases uint64 `json:"releases,omitempty"`
	// Host is the holder's id in a duty's key (duty.go); a member's key is
	// its id already, and leaves it out.
	Host string `json:"host,omitempty"`
	// Partitions is a member's partition count, which every host must share
	// (checkAgreement); 0 from a build that did not record it.
	Partitions int `json:"partitions,omitempty"`
}

func (m memberInfo) encode() []byte {
	b, _ := json.Marshal(m) // a struct of strings, times and numbers
	return b
}

func decodeMember(b []byte) (memberInfo, error) {
	var m memberInfo
	if err := json.Unmarshal(b, &m); err != nil {
		return memberInfo{}, fmt.Errorf("cluster: a membership value %q: %w", b, err)
	}
	return m, nil
}

// openBucket creates the membership bucket or opens the existing one, which
// must have the lease TTL this host uses: the TTL is enforced by the server,
// and a host whose own give-up deadline assumed a longer one would still be
// working when the others take over.
func openBucket(ctx context.Context, js jetstream.JetStream, o *Options) (jetstream.KeyValue, error) {
	cfg := jetstream.KeyValueConfig{
		Bucket:      o.Bucket,
		Description: "Berth hosts: one key per live host, expiring unless renewed",
		History:     1,
		TTL:         o.LeaseTTL,
		Replicas:    o.Replicas,
		// Without markers a key that expires just disappears and watchers
		// are not told; with them every watcher sees the expiry. They live
		// a TTL, long enough for any watcher to catch up.
		LimitMarkerTTL: o.LeaseTTL,
	}
	// The bucket is the stream KV_<bucket>: the first heartbeat would find
	// no leader to answer it without the wait.
	kv, err := jsapi.Ensure(ctx, js, "KV_"+o.Bucket, jsapi.RequestTimeout, func(ctx context.Context) (jetstream.KeyValue, error) {
		kv, err := js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			return js.KeyValue(ctx, o.Bucket)
		}
		return kv, err
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: membership bucket %q: %w", o.Bucket, err)
	}
	st, err := jsapi.Retry(ctx, jsapi.Opening(jsapi.RequestTimeout), jsapi.Transient, kv.Status)
	if err != nil {
		return nil, fmt.Errorf("cluster: membership bucket %q: %w", o.Bucket, err)
	}
	if st.TTL() != o.LeaseTTL {
		return nil, fmt.Errorf("%w: lease TTL %v, but membership bucket %q has %v: every host of a deployment must use the same",
			errOptions, o.LeaseTTL, o.Bucket, st.TTL())
	}
	if st.LimitMarkerTTL() <= 0 {
		return nil, fmt.Errorf("%w: membership bucket %q has no limit markers, so expiries would go unseen; delete it and let a host create it",
			errOptions, o.Bucket)
	}
	return kv, nil
}

// memberGone tells whether host's key is absent from the bucket (expired,
// deleted or never there), asking the bucket's leader rather than this
// host's watcher, which may lag, or a direct get, which any replica may
// answer — one behind the leader may not have applied the key a host
// rejoined with yet: a partition is taken over from a host only once the
// server has let its lease go.
func (c *Cluster) memberGone(ctx context.Context, host string) (bool, error) {
	return keyGone(ctx, c.nc, c.opts.Bucket, host)
}

// anotherLive reports whether a host other than this one is a live member
// now: one this host's watcher has seen whose key the bucket's leader still
// has (memberGone). A host holding itself out stops renewing, so its key is
// gone within the margin of its term's end, and a live key is a host that
// takes partitions; one held out whose key has not expired yet counts
// until it has. An error counts as live: nothing can be joined through a
// NATS that does not answer, and the lease asks again at its next period.
// It is the lease's others (lease.stayOut).
func (c *Cluster) anotherLive(ctx context.Context) bool {
	c.mu.Lock()
	hosts := slices.Sorted(maps.Keys(c.members))
	c.mu.Unlock()
	for _, h := range hosts {
		if h == c.opts.Host {
			continue
		}
		if gone, err := c.memberGone(ctx, h); err != nil || !gone {
			return true
		}
	}
	return false
}

// keyGone reads key's last entry in bucket from the leader of its stream
// (the JetStream API's message get, which only the leader answers) and
// tells whether it is absent: no entry, or a delete, purge or expiry
// marker.
func keyGone(ctx context.Context, nc *nats.Conn, bucket, key string) (bool, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, jsapi.RequestTimeout)
		defer cancel()
	}
	req, err := json.Marshal(struct {
		LastBySubject string `json:"last_by_subj"`
	}{"$KV." + bucket + "." + key})
	if err != nil {
		return false, err
	}
	msg, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+bucket, req)
	if err != nil {
		return false, fmt.Errorf("cluster: membership of %q: %w", key, err)
	}
	var resp struct {
		Message *struct {
			Header []byte `json:"hdrs"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return false, fmt.Errorf("cluster: membership of %q: %w", key, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == codeNoMessageFound:
		return true, nil
	case resp.Error != nil:
		return false, fmt.Errorf("cluster: membership of %q: %w", key, resp.Error)
	case resp.Message == nil:
		return false, fmt.Errorf("cluster: membership of %q: an empty answer", key)
	case len(resp.Message.Header) == 0:
		return false, nil
	}
	h, err := nats.DecodeHeadersMsg(resp.Message.Header)
	if err != nil {
		return false, fmt.Errorf("cluster: membership of %q: %w", key, err)
	}
	return h.Get(kvOperation) != "" || h.Get(jetstream.MarkerReasonHeader) != "", nil
}

const (
	// codeNoMessageFound is JSNoMessageFoundErr, which nats.go has no name for.
	codeNoMessageFound jetstream.ErrorCode = 10037
	// kvOperation is the header of a KV delete or purge (nats.go's own
	// name is unexported).
	kvOperation = "KV-Operation"
)

// watchMembers watches the hosts' keys of the bucket: the keys of one
// token, which host ids are. Duties' keys ("duty.<name>", duty.go) have two
// and are not members.
func watchMembers(ctx context.Context, kv jetstream.KeyValue) (jetstream.KeyWatcher, error) {
	return kv.Watch(ctx, "*")
}

// openWatch is watchMembers for Open: a watch whose consumer NATS did not
// create within its request timeout (a cluster still forming, or loaded: a
// CI run's first host of three waited more than 5 s) is asked again, for
// up to within when ctx has no deadline. The watcher lives on run.
func openWatch(ctx, run context.Context, kv jetstream.KeyValue, within time.Duration) (jetstream.KeyWatcher, error) {
	return jsapi.Retry(ctx, jsapi.Policy{Within: within}, jsapi.Transient,
		func(context.Context) (jetstream.KeyWatcher, error) { return watchMembers(run, kv) })
}
