package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/berthhq/berth/internal/jsapi"
	"github.com/nats-io/nats.go/jetstream"
)

// errDisagree: a live host of the deployment runs with settings every host
// must share.
var errDisagree = errors.New("cluster: this host's settings differ from the deployment's")

// checkAgreement refuses to join a deployment whose live hosts run with
// another partition count: an aggregate's partition, every claim and every
// partition checkpoint depend on it, so two counts at once would deliver an
// aggregate on two hosts (and a host starting with another count would
// repartition checkpoints the others are working from). The lease TTL needs
// no check here: the membership bucket's TTL is it (openBucket). Hosts of
// builds that did not record a count are not checked.
//
// It is asked again while the bucket cannot answer yet, as openBucket is:
// a replica just placed on the node this host is connected to answers a
// direct get "no responders" until it has caught up.
func checkAgreement(ctx context.Context, kv jetstream.KeyValue, o *Options) error {
	ctx, cancel := context.WithTimeout(ctx, o.OpenTimeout)
	defer cancel()
	_, err := jsapi.Retry(ctx, jsapi.Opening(jsapi.RequestTimeout), jsapi.Transient, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, agreeOnce(ctx, kv, o)
	})
	return err
}

// agreeOnce is one try of checkAgreement.
func agreeOnce(ctx context.Context, kv jetstream.KeyValue, o *Options) error {
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return fmt.Errorf("cluster: list the members of %q: %w", o.Bucket, err)
	}
	defer keys.Stop()
	for host := range keys.Keys() {
		if host == o.Host || strings.Contains(host, ".") { // this host's previous run; duties
			continue
		}
		e, err := kv.Get(ctx, host)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue // gone since listed
		}
		if err != nil {
			return fmt.Errorf("cluster: membership of %q: %w", host, err)
		}
		m, err := decodeMember(e.Value())
		if err != nil {
			continue // not a host's value; the watcher logs it
		}
		if m.Partitions != 0 && m.Partitions != o.Partitions {
			return fmt.Errorf("%w: subscription.partitions is %d here, but host %q runs with %d; every host must use the same (to change it, stop every host, change it on all, start them again)",
				errDisagree, o.Partitions, host, m.Partitions)
		}
	}
	return nil
}
