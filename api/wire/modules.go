package wire

import "time"

// ModuleInfo is a deployed module (PUT and GET /v1/modules/{name}).
type ModuleInfo struct {
	Name string `json:"name"`
	// Version numbers the module's uploads (and rollbacks) from 1.
	Version int `json:"version"`
	// RolledBackFrom is, when this version is a rollback, the version whose
	// bytes it deployed again.
	RolledBackFrom int           `json:"rolledBackFrom,omitempty"`
	SHA256         string        `json:"sha256"` // of the .wasm bytes, hex
	Size           int           `json:"size"`   // bytes of the .wasm
	Uploaded       time.Time     `json:"uploaded"`
	Processor      string        `json:"processor"`
	Kind           string        `json:"kind"`  // reactor, saga or projection
	Start          string        `json:"start"` // where a new subscription starts: default, beginning or end
	Handlers       []HandlerInfo `json:"handlers"`
	Subscriptions  []string      `json:"subscriptions"` // one per handler
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

// ModuleVersion is one kept version of a module (GET
// /v1/modules/{name}/versions).
type ModuleVersion struct {
	Version        int       `json:"version"`
	SHA256         string    `json:"sha256"` // of the .wasm bytes, hex
	Size           int       `json:"size"`   // bytes of the .wasm
	Uploaded       time.Time `json:"uploaded"`
	RolledBackFrom int       `json:"rolledBackFrom,omitempty"` // the version a rollback deployed again
	Current        bool      `json:"current"`                  // the version deployed now
}

// ModuleVersionList is the answer of GET /v1/modules/{name}/versions: the
// kept versions, oldest first (store.module-versions of them at most).
type ModuleVersionList struct {
	Module   string          `json:"module"`
	Versions []ModuleVersion `json:"versions"`
}

// RollbackRequest is the body of POST /v1/modules/{name}/rollback.
type RollbackRequest struct {
	// Version is the kept version whose bytes are deployed again, as the
	// module's next version. Required.
	Version *int `json:"version"`
}
