package registry

import (
	"time"

	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/subscription"
)

// Settings is what a Registry reads of the host's configuration. It is
// asked again each time it is needed (Options.Settings returns the running
// one), so that a reload applies at once. The host's *config.Config is one.
type Settings interface {
	// Module returns the sandbox settings of the module name.
	Module(name string) sandbox.ModuleConfig
	// RetryLayers returns the host's default retry layer and the
	// operator's override for subscription.
	RetryLayers(subscription string) (defaults, override retry.Settings)
	// Parked returns subscription's long-horizon retry settings.
	Parked(subscription string) retry.ParkedSettings
	// CommandGateway returns where a saga's commands to aggregates of
	// aggregateType are sent; ok is false when nowhere.
	CommandGateway(aggregateType string) (gw Gateway, ok bool)
	// ModuleVersions returns how many versions of a module are kept, the
	// current one included (0 or less: DefaultKeepVersions).
	ModuleVersions() int
}

// Gateway is where a saga's commands to one aggregate type are sent.
type Gateway struct {
	// AggregateType is the target aggregate type the gateway serves.
	AggregateType string
	// URL is the endpoint commands are POSTed to.
	URL string
	// Timeout bounds one request (never zero in a Gateway from
	// Settings.CommandGateway).
	Timeout time.Duration
	// Headers are sent with every request; a copy the caller may keep.
	Headers map[string]string
}

// DefaultProjectionWriters is how many calls' writes one projection
// transaction applies at most by default: the deliveries one subscription
// runs at once by default (partitions x concurrency), so that a group takes
// them all.
const DefaultProjectionWriters = subscription.DefaultPartitions * subscription.DefaultConcurrency
