package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/berthhq/berth/retry"
)

// Defaults of [server].
const (
	DefaultListen          = "127.0.0.1:8080"
	DefaultDataDir         = "./data"
	DefaultMaxModuleSize   = 32 * MiB
	DefaultMaxBodySize     = 1 * MiB
	DefaultReadTimeout     = retry.Duration(30e9)
	DefaultWriteTimeout    = retry.Duration(60e9)
	DefaultShutdownTimeout = retry.Duration(15e9)
	DefaultHostMemoryLimit = 512 * MiB
	// MinMemoryLimit is the least server.memory-limit other than 0: below
	// it the collector would run all the time.
	MinMemoryLimit      = 128 * MiB
	DefaultOperatorWait = retry.Duration(10e9)
)

// ServerConfig is [server].
type ServerConfig struct {
	// Listen is the address of the REST API, host:port (default "127.0.0.1:8080"). Without a token the
	// host must be a loopback address. Port 0 picks a free port. Changing it needs a restart.
	Listen string `toml:"listen"`
	// DataDir holds the event log, checkpoints, the failure ledger, uploaded modules and the compilation
	// cache (default "./data"). Changing it needs a restart.
	DataDir string `toml:"data-dir"`
	// MaxModuleSize caps an uploaded .wasm body (default 32MiB); a larger upload is refused with 413.
	MaxModuleSize Size `toml:"max-module-size"`
	// MaxBodySize caps a JSON request body (default 1MiB); a larger one is refused with 413.
	MaxBodySize Size `toml:"max-body-size"`
	// ReadTimeout bounds reading a whole request, body included (default 30s).
	ReadTimeout retry.Duration `toml:"read-timeout"`
	// WriteTimeout bounds handling a request and writing its response (default 60s).
	WriteTimeout retry.Duration `toml:"write-timeout"`
	// ShutdownTimeout bounds a stopping host (default 15s): requests and handlers in flight, then the
	// stores' last writes (flushing their memtables). Past it the host exits with status 1, naming what it
	// could not flush; what was acknowledged is in the stores' write-ahead logs, replayed at the next start.
	ShutdownTimeout retry.Duration `toml:"shutdown-timeout"`
	// MemoryLimit is the host's soft memory limit (default 512MiB): what the Go runtime may hold (heap,
	// stacks; not compiled module code, which lives outside it). Near it the garbage collector runs more
	// often, so garbage does not pile up to twice the live heap in a burst; a live heap above it is never
	// refused, the collector just uses up to half the CPU. Under a cgroup memory limit the host uses 90 %
	// of that limit when it is lower. "0B" turns it off; a GOMEMLIMIT environment variable wins over it.
	MemoryLimit Size `toml:"memory-limit"`
	// OperatorWait bounds how long a resume or skip waits for an aggregate that a long-horizon retry is
	// working on (default 10s); past it the call answers 409 and changes nothing.
	OperatorWait retry.Duration `toml:"operator-wait"`
	// AllowedHosts are more names the API answers to in a request's Host header (default none), beside
	// the address it serves (loopback names when it listens on loopback): the name of a reverse proxy
	// or a DNS name of the machine. Names only, no port; "*" turns the Host check off. A request with
	// any other Host is refused with 403, so that a DNS-rebinding page cannot reach the API.
	AllowedHosts []string `toml:"allowed-hosts"`
}

func (s ServerConfig) validate(p *problems, at keyPath) {
	if _, _, err := splitListen(s.Listen); err != nil {
		p.add(at.key("listen"), fmt.Sprintf("%q", s.Listen), "%v", err)
	}
	if s.DataDir == "" {
		p.add(at.key("data-dir"), `""`, "must not be empty")
	}
	positiveSize(p, at.key("max-module-size"), s.MaxModuleSize)
	positiveSize(p, at.key("max-body-size"), s.MaxBodySize)
	positiveDuration(p, at.key("read-timeout"), s.ReadTimeout)
	positiveDuration(p, at.key("write-timeout"), s.WriteTimeout)
	positiveDuration(p, at.key("shutdown-timeout"), s.ShutdownTimeout)
	positiveDuration(p, at.key("operator-wait"), s.OperatorWait)
	if s.MemoryLimit < 0 || s.MemoryLimit > 0 && s.MemoryLimit < MinMemoryLimit {
		p.add(at.key("memory-limit"), fmt.Sprintf("%q", s.MemoryLimit.String()), "must be 0B (off) or at least %s", MinMemoryLimit.String())
	}
	for i, h := range s.AllowedHosts {
		if err := checkHost(h, false); err != nil {
			p.add(at.key("allowed-hosts").at(i), fmt.Sprintf("%q", h), "%v", err)
		}
	}
}

// splitListen checks a listen address: host:port, with a port from 0 to 65535.
func splitListen(addr string) (host string, port int, err error) {
	h, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("want host:port, e.g. 127.0.0.1:8080 (%v)", err)
	}
	n, err := strconv.Atoi(ps)
	if err != nil || n < 0 || n > 65535 {
		return "", 0, fmt.Errorf("port %q: want a number from 0 to 65535", ps)
	}
	return h, n, nil
}

func (s ServerConfig) validListen() bool {
	_, _, err := splitListen(s.Listen)
	return err == nil
}

// loopback reports whether Listen is on a loopback address only: "localhost", or an IP address in
// 127.0.0.0/8 or ::1. An empty host (":8080") listens on every interface.
func (s ServerConfig) loopback() bool {
	h, _, err := splitListen(s.Listen)
	if err != nil {
		return false
	}
	if h == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.Unmap().IsLoopback()
}

func positiveSize(p *problems, at keyPath, s Size) {
	if s <= 0 {
		p.add(at, fmt.Sprintf("%q", s.String()), "must be more than 0")
	}
}

func positiveDuration(p *problems, at keyPath, d retry.Duration) {
	if d <= 0 {
		p.add(at, fmt.Sprintf("%q", d.String()), "must be more than 0")
	}
}

func positiveInt(p *problems, at keyPath, n, maxN int) {
	switch {
	case n < 1:
		p.add(at, strconv.Itoa(n), "must be at least 1")
	case n > maxN:
		p.add(at, strconv.Itoa(n), "must be at most %d", maxN)
	}
}
