package jetstream

import (
	"fmt"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/jsapi"
)

// Options configure the JetStream log. The zero value is a usable default;
// every zero field means its default.
type Options struct {
	// Stream is the name of the JetStream stream holding the log. Default
	// (""): DefaultStream. Every host of one deployment names the same
	// stream.
	Stream string

	// Prefix is the first token(s) of every commit's subject,
	// <prefix>.<shard>.<type>.<id> (subject.go); the stream takes
	// <prefix>.>, which no other stream of the account may overlap. Default
	// (""): DefaultPrefix.
	Prefix string

	// Replicas is how many NATS servers keep the stream: 1, or 3 for a
	// stream that outlives one server. Default (0): 1.
	Replicas int

	// RequestTimeout bounds each request to NATS (a publish waiting for its
	// acknowledgement, a get, a stream info) when the caller's context has
	// no earlier deadline. Default (0): DefaultRequestTimeout.
	RequestTimeout time.Duration

	// PublishAttempts bounds an Append whose caller gives no deadline: it
	// asks NATS again (a leader election, an acknowledgement that did not
	// come within RequestTimeout) for PublishAttempts × RequestTimeout in
	// all. A caller's deadline bounds it otherwise. Every publish of one
	// commit carries the same Nats-Msg-Id, so at most one is stored and a
	// later one is answered with the first one's position. Default (0):
	// DefaultPublishAttempts.
	PublishAttempts int

	// DuplicateWindow is how long the stream remembers a Nats-Msg-Id; it
	// must outlast PublishAttempts × RequestTimeout and the deadline of an
	// Append's caller (a REST append's is server.write-timeout). Default (0):
	// DefaultDuplicateWindow.
	DuplicateWindow time.Duration
}

// Defaults applied for zero Options fields.
const (
	// DefaultStream is the stream name used when Options leaves it empty.
	DefaultStream = "BERTH_EVENTS"
	// DefaultPrefix is the subject prefix used when Options leaves it empty.
	DefaultPrefix = "berth.events"
	// DefaultRequestTimeout is the RequestTimeout used when Options leaves
	// it 0: JetStream's request timeout (jsapi.RequestTimeout).
	DefaultRequestTimeout = jsapi.RequestTimeout
	// DefaultPublishAttempts is the PublishAttempts used when Options leaves
	// it 0.
	DefaultPublishAttempts = 3
	// DefaultDuplicateWindow is the DuplicateWindow used when Options leaves
	// it 0 (JetStream's own default).
	DefaultDuplicateWindow = 2 * time.Minute
)

// Check returns an error naming the first field of o out of range (after
// defaults), nil when Open would accept o: for a configuration to refuse at
// load what Open would refuse later.
func (o Options) Check() error {
	_, err := o.withDefaults()
	return err
}

// withDefaults returns o with its defaults filled in, or an error naming the
// first field out of range.
func (o Options) withDefaults() (Options, error) {
	if o.Stream == "" {
		o.Stream = DefaultStream
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.PublishAttempts == 0 {
		o.PublishAttempts = DefaultPublishAttempts
	}
	if o.DuplicateWindow == 0 {
		o.DuplicateWindow = DefaultDuplicateWindow
	}
	switch {
	case strings.ContainsAny(o.Stream, " \t\r\n.*>/\\"):
		return o, fmt.Errorf("stream name %q holds a space, '.', '*', '>', '/' or '\\'", o.Stream)
	case len(o.Stream) > 255:
		return o, fmt.Errorf("stream name is %d bytes, more than 255", len(o.Stream))
	case !validPrefix(o.Prefix):
		return o, fmt.Errorf("subject prefix %q is not one or more dot-separated tokens without spaces or wildcards", o.Prefix)
	case o.Replicas != 1 && o.Replicas != 3:
		return o, fmt.Errorf("replicas is %d, want 1 or 3", o.Replicas)
	case o.RequestTimeout < 0:
		return o, fmt.Errorf("request timeout %v is negative", o.RequestTimeout)
	case o.PublishAttempts < 0:
		return o, fmt.Errorf("publish attempts %d is negative", o.PublishAttempts)
	case o.DuplicateWindow < 0:
		return o, fmt.Errorf("duplicate window %v is negative", o.DuplicateWindow)
	}
	return o, nil
}

// validPrefix reports whether p is a literal subject: tokens without
// wildcards or white space, none empty.
func validPrefix(p string) bool {
	if p == "" || strings.ContainsAny(p, " \t\r\n*>") {
		return false
	}
	for _, tok := range strings.Split(p, ".") {
		if tok == "" {
			return false
		}
	}
	return true
}
