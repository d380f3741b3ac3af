package config

import (
	"errors"
	"strings"
	"testing"
)

func TestClusterTable(t *testing.T) {
	const js = "[store]\nbackend = \"jetstream\"\n"
	tests := []struct {
		name string
		text string
		want []string // each a prefix of one error, in order; none: valid
	}{
		{"defaults", js, nil},
		{"all set", js + "[cluster]\nhost-id = \"web_1-a\"\nlease-ttl = \"3s\"\naddress = \"https://web-1.example.com:8443\"\n", nil},
		{"ignored for badger", "[cluster]\nhost-id = \"a.b\"\nlease-ttl = \"1s\"\n", nil},
		{"every problem", js + `[cluster]
host-id = "web-1.example.com"
lease-ttl = "2s"
address = "web-1:8080"
`, []string{
			`berth.toml:4: cluster.host-id: "web-1.example.com": must be letters, digits, '-' and '_' only`,
			`berth.toml:5: cluster.lease-ttl: "2s": must be at least 3s`,
			`berth.toml:6: cluster.address: "web-1:8080": want an http:// or https:// URL`,
		}},
		{"long id", js + "[cluster]\nhost-id = \"" + strings.Repeat("a", 65) + "\"\n",
			[]string{`berth.toml:4: cluster.host-id: "` + strings.Repeat("a", 65) + `": must be at most 64 characters`}},
		{"address without host", js + "[cluster]\naddress = \"http://\"\n",
			[]string{`berth.toml:4: cluster.address: "http://": the URL has no host`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantErrors(t, tc.text, tc.want) })
	}
	for _, k := range []string{"cluster.host-id", "cluster.lease-ttl", "cluster.address"} {
		if !NeedsRestart(k) {
			t.Errorf("NeedsRestart(%s) = false", k)
		}
	}
}

func TestHostIDOf(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"web-1", "web-1"},
		{"web-1.example.com", "web-1-example-com"},
		{"Host_2", "Host_2"},
		{" box:3 ", "box-3"},
		{"", ""},
		{strings.Repeat("x", 70), strings.Repeat("x", MaxHostIDLength)},
	} {
		if got := hostIDOf(tc.name); got != tc.want {
			t.Errorf("hostIDOf(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	c := Default()
	c.Cluster.HostID = "given"
	if id, err := c.ClusterHostID(); err != nil || id != "given" {
		t.Errorf("ClusterHostID with host-id set = %q, %v", id, err)
	}
}

func TestAddressOf(t *testing.T) {
	hostname := func() (string, error) { return "box", nil }
	for _, tc := range []struct{ listen, want string }{
		{"127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"localhost:9000", "http://localhost:9000"},
		{":8080", "http://box:8080"},
		{"0.0.0.0:8080", "http://box:8080"},
		{"[::]:8080", "http://box:8080"},
		{"[::1]:8080", "http://[::1]:8080"},
	} {
		if got := addressOf(tc.listen, hostname); got != tc.want {
			t.Errorf("addressOf(%q) = %q, want %q", tc.listen, got, tc.want)
		}
	}
	if got := addressOf(":8080", func() (string, error) { return "", errors.New("no name") }); got != "http://:8080" {
		t.Errorf("addressOf without a hostname = %q", got)
	}
	c := Default()
	c.Cluster.Address = "https://berth.example.com"
	if got := c.ClusterAddress(); got != c.Cluster.Address {
		t.Errorf("ClusterAddress with address set = %q", got)
	}
}
