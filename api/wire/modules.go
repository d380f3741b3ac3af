package wire

import "time"

// ModuleInfo is a deployed module (PUT and GET /v1/modules/{name}).
type ModuleInfo struct {
	Name          string        `json:"name"`
	SHA256        string        `json:"sha256"` // of the .wasm bytes, hex
	Size          int           `json:"size"`   // bytes of the .wasm
	Uploaded      time.Time     `json:"uploaded"`
	Processor     string        `json:"processor"`
	Kind          string        `json:"kind"`  // reactor, saga or projection
	Start         string        `json:"start"` // where a new subscription starts: default, beginning or end
	Handlers      []HandlerInfo `json:"handlers"`
	Subscriptions []string      `json:"subscriptions"` // one per handler
	// DeadlineGuard says how the sandbox enforces the handler timeout for
	// this module.
	DeadlineGuard string `json:"deadlineGuard"`
}

// HandlerInfo is one handler of a module.
type HandlerInfo struct {
	Name       string   `json:"name"`
	EventTypes []string `json:"eventTypes"`
	// Subscription is processor.handler; empty for a saga's rejection
	// handler, which has no subscription of its own.
	Subscription string `json:"subscription,omitempty"`
}

// ModuleList is the answer of GET /v1/modules.
type ModuleList struct {
	Modules []ModuleInfo `json:"modules"`
}
