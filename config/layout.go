package config

import "path/filepath"

// Where each part of the host keeps its files under server.data-dir. These are the one place the layout
// of the data directory is written down: the host opens its parts there and tests that open a host
// find them there.

// EventLogDir returns the event log's directory: <data-dir>/events.
func (c *Config) EventLogDir() string { return filepath.Join(c.Server.DataDir, "events") }

// LedgerDir returns the failure ledger's directory: <data-dir>/ledger.
func (c *Config) LedgerDir() string { return filepath.Join(c.Server.DataDir, "ledger") }

// ModulesDir returns the directory uploaded modules are kept in: <data-dir>/modules.
func (c *Config) ModulesDir() string { return filepath.Join(c.Server.DataDir, "modules") }

// WasmCacheDir returns the directory of the sandbox's compilation cache: <data-dir>/wasm-cache.
func (c *Config) WasmCacheDir() string { return filepath.Join(c.Server.DataDir, "wasm-cache") }

// LedgerCacheDir returns the directory of this host's cache of a ledger kept in NATS JetStream
// (store.backend "jetstream"): <data-dir>/ledger-cache.
func (c *Config) LedgerCacheDir() string { return filepath.Join(c.Server.DataDir, "ledger-cache") }
