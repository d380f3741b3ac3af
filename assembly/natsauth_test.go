package assembly_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// Hosts reach NATS servers that ask who they are: [store.jetstream]'s
// credentials-file, nkey-seed-file and tls-* files are what the host
// connects with, and a host without the right ones is refused at once,
// naming the connection.

// jetStreamHost is testConfig on backend jetstream at url (single mode:
// no cluster id needed beyond the default).
func jetStreamHost(t *testing.T, url string) *config.Config {
	cfg := testConfig(t.TempDir())
	cfg.Store.Backend = config.BackendJetStream
	cfg.Store.JetStream.URLs = []string{url}
	cfg.Cluster.HostID = "h1"
	return cfg
}

// appendOne appends an event through h, failing the test if it cannot.
func appendOne(t *testing.T, h *assembly.Host) {
	t.Helper()
	if _, err := h.Events.Append(t.Context(), eventlog.AppendRequest{AggregateType: "Order", AggregateID: "o-1",
		ExpectedVersion: eventlog.AnyVersion, Events: []eventlog.Event{{Type: "OrderPlaced"}}}); err != nil {
		t.Fatal(err)
	}
}

// refusedAtOnce opens a host over cfg and checks that it fails on its NATS
// connection with an error containing want, well within open-timeout: a
// refusal is not waited out as a server still starting is.
func refusedAtOnce(t *testing.T, cfg *config.Config, want string) {
	t.Helper()
	start := time.Now()
	_, err := assembly.Open(t.Context(), cfg, assembly.Options{})
	var oe *assembly.OpenError
	if !errors.As(err, &oe) || oe.Part != "NATS connection" || !strings.Contains(err.Error(), want) {
		t.Fatalf("open: %v; want a NATS connection error with %q", err, want)
	}
	t.Logf("refused: %v", err)
	if took := time.Since(start); took > cfg.Store.JetStream.OpenTimeout.Std()/2 {
		t.Errorf("refused after %v: waited as if NATS were starting", took)
	}
}

func TestNkeyAuthentication(t *testing.T) {
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	srv := natstest.RunServerWith(t, func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} })
	dir := t.TempDir()
	seedFile := filepath.Join(dir, "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := jetStreamHost(t, srv.URL())
	cfg.Store.JetStream.NkeySeedFile = seedFile
	appendOne(t, open(t, cfg, assembly.Options{}))

	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	otherFile := filepath.Join(dir, "other.nk")
	if err := os.WriteFile(otherFile, otherSeed, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg = jetStreamHost(t, srv.URL())
	cfg.Store.JetStream.NkeySeedFile = otherFile
	refusedAtOnce(t, cfg, "Authorization Violation")

	cfg = jetStreamHost(t, srv.URL())
	refusedAtOnce(t, cfg, "Authorization Violation")
}

// testPKI is a CA and a server and a client certificate it signed, as PEM
// files in a temporary directory.
type testPKI struct {
	caFile, serverCert, serverKey, clientCert, clientKey string
	serverTLS                                            *tls.Config
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "berth test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, *ecdsa.PrivateKey) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "berth test"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		b, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var p testPKI
	p.caFile = write("ca.pem", "CERTIFICATE", caDER)
	sDER, sKey := issue(2, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	p.serverCert, p.serverKey = write("server.pem", "CERTIFICATE", sDER), write("server-key.pem", "EC PRIVATE KEY", keyDER(sKey))
	cDER, cKey := issue(3, x509.ExtKeyUsageClientAuth, nil)
	p.clientCert, p.clientKey = write("client.pem", "CERTIFICATE", cDER), write("client-key.pem", "EC PRIVATE KEY", keyDER(cKey))
	pair, err := tls.LoadX509KeyPair(p.serverCert, p.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	p.serverTLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	return p
}

func TestTLSWithClientCertificates(t *testing.T) {
	pki := newTestPKI(t)
	srv := natstest.RunServerWith(t, func(o *server.Options) {
		o.TLS, o.TLSVerify, o.TLSConfig, o.TLSTimeout = true, true, pki.serverTLS, 2
	})
	cfg := jetStreamHost(t, srv.URL())
	cfg.Store.JetStream.TLSCAFile = pki.caFile
	cfg.Store.JetStream.TLSCertFile, cfg.Store.JetStream.TLSKeyFile = pki.clientCert, pki.clientKey
	appendOne(t, open(t, cfg, assembly.Options{}))

	// Without a client certificate the server refuses the handshake.
	cfg = jetStreamHost(t, srv.URL())
	cfg.Store.JetStream.TLSCAFile = pki.caFile
	refusedAtOnce(t, cfg, "tls") // "certificate required", or the pipe the server broke

	// Without the CA the host does not trust the server.
	cfg = jetStreamHost(t, srv.URL())
	cfg.Store.JetStream.TLSCertFile, cfg.Store.JetStream.TLSKeyFile = pki.clientCert, pki.clientKey
	refusedAtOnce(t, cfg, "certificate")
}

// operatorServer runs a NATS server in operator mode — accounts and users
// are JWTs — with one account that may use JetStream, and returns it and
// a .creds file (user JWT and seed) of a user of that account.
func operatorServer(t *testing.T) (*natstest.Node, string) {
	t.Helper()
	op, _ := nkeys.CreateOperator()
	opPub, _ := op.PublicKey()
	encode := func(c interface {
		Encode(nkeys.KeyPair) (string, error)
	}, kp nkeys.KeyPair) string {
		s, err := c.Encode(kp)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	opClaims, err := jwt.DecodeOperatorClaims(encode(jwt.NewOperatorClaims(opPub), op))
	if err != nil {
		t.Fatal(err)
	}
	sys, _ := nkeys.CreateAccount()
	sysPub, _ := sys.PublicKey()
	acc, _ := nkeys.CreateAccount()
	accPub, _ := acc.PublicKey()
	accClaims := jwt.NewAccountClaims(accPub)
	accClaims.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	resolver := &server.MemAccResolver{}
	for pub, claims := range map[string]string{sysPub: encode(jwt.NewAccountClaims(sysPub), op), accPub: encode(accClaims, op)} {
		if err := resolver.Store(pub, claims); err != nil {
			t.Fatal(err)
		}
	}
	user, _ := nkeys.CreateUser()
	userPub, _ := user.PublicKey()
	seed, _ := user.Seed()
	creds, err := jwt.FormatUserConfig(encode(jwt.NewUserClaims(userPub), acc), seed)
	if err != nil {
		t.Fatal(err)
	}
	credsFile := filepath.Join(t.TempDir(), "user.creds")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := natstest.RunServerWith(t, func(o *server.Options) {
		o.TrustedOperators = []*jwt.OperatorClaims{opClaims}
		o.AccountResolver = resolver
		o.SystemAccount = sysPub
	})
	return srv, credsFile
}

func TestCredentialsFile(t *testing.T) {
	srv, creds := operatorServer(t)
	cfg := jetStreamHost(t, srv.URL())
	cfg.Store.JetStream.CredentialsFile = creds
	appendOne(t, open(t, cfg, assembly.Options{}))

	cfg = jetStreamHost(t, srv.URL())
	refusedAtOnce(t, cfg, "Authorization Violation")
}
