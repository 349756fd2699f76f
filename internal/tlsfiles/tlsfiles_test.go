package tlsfiles_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/certtest"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/tlsfiles"
)

// serve runs a TLS server on loopback with cfg until the test ends: each
// connection is answered "ok" once its handshake succeeds.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tln := tls.NewListener(ln, cfg)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := tln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				if c.(*tls.Conn).Handshake() == nil {
					_, _ = c.Write([]byte("ok"))
				}
			})
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

// dial connects to addr with cfg and returns the serial number of the
// server's certificate, or the error of the handshake or of the first
// read (where TLS 1.3 reports a client certificate the server refused).
func dial(addr string, cfg *tls.Config) (*big.Int, error) {
	d := &net.Dialer{Timeout: 30 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 2)
	if _, err := io.ReadFull(c, buf); err != nil {
		return nil, err
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

func clientOf(ca *certtest.CA, certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", Certificates: certs}
}

func keyPair(t *testing.T, p certtest.Pair) tls.Certificate {
	t.Helper()
	kp, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// run runs c.Run until the test ends.
func run(t *testing.T, c *tlsfiles.Certs) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// eventually polls f until it reports true, for up to a minute: a loaded
// machine may take seconds to deliver a file event and re-read.
func eventually(t *testing.T, what string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last string
	for time.Now().Before(deadline) {
		ok, state := f()
		if ok {
			return
		}
		last = state
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not within a minute; last: %s", what, last)
}

func servedBy(addr string, cfg *tls.Config, want certtest.Pair) func() (bool, string) {
	return func() (bool, string) {
		got, err := dial(addr, cfg)
		if err != nil {
			return false, err.Error()
		}
		return got.Cmp(want.Leaf.SerialNumber) == 0, "serial " + got.String() + ", want " + want.Leaf.SerialNumber.String()
	}
}

func TestRotatedCertificateServedWithoutRestart(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "test CA")
	first := ca.Issue("first")
	certFile, keyFile := first.Write(t, dir, "tls")
	var logs logtest.Buffer
	c, err := tlsfiles.Load(tlsfiles.Files{Cert: certFile, Key: keyFile}, tlsfiles.Options{
		Name: "test listener", Logger: slog.New(slog.NewTextHandler(&logs, nil)), Debounce: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := c.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cfg)
	run(t, c)
	eventually(t, "the first certificate served", servedBy(addr, clientOf(ca), first))

	second := ca.Issue("second")
	second.Write(t, dir, "tls")
	eventually(t, "the rotated certificate served", servedBy(addr, clientOf(ca), second))
	if !strings.Contains(logs.String(), "TLS files reloaded") || !strings.Contains(logs.String(), "CN=second") {
		t.Errorf("no reload logged:\n%s", logs.String())
	}
}

// A Kubernetes Secret volume holds each file as a link through "..data",
// a link to a timestamped directory that an update swaps with a rename.
func TestKubernetesSecretSwapFollowed(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "test CA")
	writeVersion := func(name string, p certtest.Pair) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		p.Write(t, filepath.Join(dir, name), "tls")
		if err := os.WriteFile(filepath.Join(dir, name, "ca.crt"), ca.PEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(name, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	first, second := ca.Issue("first"), ca.Issue("second")
	writeVersion("..2026_01_01_00_00_00.1", first)
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := tlsfiles.Load(tlsfiles.Files{Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key")}, tlsfiles.Options{Debounce: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := c.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cfg)
	run(t, c)
	eventually(t, "the first certificate served", servedBy(addr, clientOf(ca), first))
	writeVersion("..2026_01_02_00_00_00.2", second)
	if err := os.RemoveAll(filepath.Join(dir, "..2026_01_01_00_00_00.1")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the swapped certificate served", servedBy(addr, clientOf(ca), second))
}

func TestBadRotationKeepsTheLoadedCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "test CA")
	first := ca.Issue("first")
	certFile, keyFile := first.Write(t, dir, "tls")
	var logs logtest.Buffer
	c, err := tlsfiles.Load(tlsfiles.Files{Cert: certFile, Key: keyFile}, tlsfiles.Options{
		Name: "test listener", Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := c.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cfg)

	// A new certificate whose key is not written yet (a half-done
	// rotation), then a file that is no certificate at all.
	other := ca.Issue("other")
	if err := os.WriteFile(certFile, other.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	err = c.Reload()
	if err == nil || !strings.Contains(err.Error(), certFile) || !strings.Contains(err.Error(), keyFile) {
		t.Errorf("Reload of a certificate with the old key = %v, want an error naming both files", err)
	}
	if err := os.WriteFile(certFile, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Reload(); err == nil || !strings.Contains(err.Error(), certFile) {
		t.Errorf("Reload of a garbled certificate = %v, want an error naming %s", err, certFile)
	}
	got, err := dial(addr, clientOf(ca))
	if err != nil {
		t.Fatal(err)
	}
	if got.Cmp(first.Leaf.SerialNumber) != 0 {
		t.Errorf("served serial %v after bad reloads, want the first certificate's %v", got, first.Leaf.SerialNumber)
	}
	if !strings.Contains(logs.String(), "TLS files not reloaded") {
		t.Errorf("failed reload not logged:\n%s", logs.String())
	}
	// Once the files are good again, the next reload serves them.
	other.Write(t, dir, "tls")
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	if got, err := dial(addr, clientOf(ca)); err != nil || got.Cmp(other.Leaf.SerialNumber) != 0 {
		t.Errorf("after a good reload: serial %v, %v; want %v", got, err, other.Leaf.SerialNumber)
	}
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, stranger := certtest.NewCA(t, "client CA"), certtest.NewCA(t, "another CA")
	certFile, keyFile := ca.Issue("server").Write(t, dir, "server")
	c, err := tlsfiles.Load(tlsfiles.Files{Cert: certFile, Key: keyFile, CA: ca.WriteCA(dir, "ca.crt")}, tlsfiles.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := c.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cfg)
	if _, err := dial(addr, clientOf(ca, keyPair(t, ca.Issue("envoy")))); err != nil {
		t.Errorf("client with a certificate of the client CA: %v", err)
	}
	for name, cfg := range map[string]*tls.Config{
		"no certificate":              clientOf(ca),
		"a certificate of another CA": clientOf(ca, keyPair(t, stranger.Issue("intruder"))),
		"no certificate, TLS 1.2":     {RootCAs: ca.Pool(), ServerName: "127.0.0.1", MaxVersion: tls.VersionTLS12},
		"another CA's cert, TLS 1.2":  {RootCAs: ca.Pool(), ServerName: "127.0.0.1", MaxVersion: tls.VersionTLS12, Certificates: []tls.Certificate{keyPair(t, stranger.Issue("intruder"))}},
	} {
		if _, err := dial(addr, cfg); err == nil {
			t.Errorf("client with %s: served, want refused", name)
		}
	}
}

func TestClientConfig(t *testing.T) {
	dir := t.TempDir()
	ca, stranger := certtest.NewCA(t, "server CA"), certtest.NewCA(t, "another CA")
	server := ca.Issue("server")
	clientCert, clientKey := ca.Issue("client").Write(t, dir, "client")
	caFile := ca.WriteCA(dir, "ca.crt")
	// The server requires a client certificate of ca.
	addr := serve(t, &tls.Config{Certificates: []tls.Certificate{keyPair(t, server)}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert})

	c, err := tlsfiles.Load(tlsfiles.Files{Cert: clientCert, Key: clientKey, CA: caFile}, tlsfiles.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := dial(addr, c.ClientConfig("127.0.0.1")); err != nil || got.Cmp(server.Leaf.SerialNumber) != 0 {
		t.Errorf("client with the CA and a client certificate: %v, %v", got, err)
	}
	if _, err := dial(addr, c.ClientConfig("db.example.com")); err == nil {
		t.Error("server certificate accepted for a name it does not have")
	}
	if _, err := c.ServerConfig(); err != nil {
		t.Errorf("ServerConfig with a certificate: %v", err)
	}
	// The CA file rotated to one that did not sign the server: refused
	// from the reload on.
	if err := os.WriteFile(caFile, stranger.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(addr, c.ClientConfig("127.0.0.1")); err == nil || !strings.Contains(err.Error(), caFile) {
		t.Errorf("server signed by a CA no longer in the CA file: %v, want refused naming %s", err, caFile)
	}
	caOnly, err := tlsfiles.Load(tlsfiles.Files{CA: caFile}, tlsfiles.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := caOnly.ServerConfig(); err == nil {
		t.Error("ServerConfig without a certificate: no error")
	}
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "test CA")
	certFile, keyFile := ca.Issue("a").Write(t, dir, "a")
	_, otherKey := ca.Issue("b").Write(t, dir, "b")
	missing := filepath.Join(dir, "missing.crt")
	empty := filepath.Join(dir, "empty.pem")
	garbage := filepath.Join(dir, "garbage.pem")
	pipe := filepath.Join(dir, "pipe")
	for path, data := range map[string]string{empty: "\n", garbage: "-----BEGIN NOTHING-----\n"} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		files tlsfiles.Files
		want  []string
	}{
		{"nothing", tlsfiles.Files{}, []string{"no certificate"}},
		{"cert without key", tlsfiles.Files{Cert: certFile}, []string{certFile, "key file"}},
		{"key without cert", tlsfiles.Files{Key: keyFile}, []string{keyFile, "certificate file"}},
		{"missing cert", tlsfiles.Files{Cert: missing, Key: keyFile}, []string{missing, "no such file"}},
		{"missing key", tlsfiles.Files{Cert: certFile, Key: missing}, []string{missing, "key file"}},
		{"key of another cert", tlsfiles.Files{Cert: certFile, Key: otherKey}, []string{certFile, otherKey, "does not match"}},
		{"empty cert", tlsfiles.Files{Cert: empty, Key: keyFile}, []string{empty, "empty"}},
		{"garbage key", tlsfiles.Files{Cert: certFile, Key: garbage}, []string{garbage}},
		{"directory", tlsfiles.Files{Cert: dir, Key: keyFile}, []string{dir, "not a regular file"}},
		{"named pipe", tlsfiles.Files{Cert: certFile, Key: pipe}, []string{pipe, "not a regular file"}},
		{"garbage CA", tlsfiles.Files{CA: garbage}, []string{garbage, "CA file", "no PEM certificate"}},
		{"missing CA", tlsfiles.Files{Cert: certFile, Key: keyFile, CA: missing}, []string{missing, "CA file"}},
	} {
		_, err := tlsfiles.Load(tc.files, tlsfiles.Options{})
		if err == nil {
			t.Errorf("%s: loaded", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", tc.name, err, w)
			}
		}
		if tc.name == "missing cert" && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: error %v does not wrap os.ErrNotExist", tc.name, err)
		}
	}
}

func TestExpiredCertificateWarned(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "test CA")
	certFile, keyFile := ca.Issue("a").Write(t, dir, "a")
	var logs logtest.Buffer
	_, err := tlsfiles.Load(tlsfiles.Files{Cert: certFile, Key: keyFile}, tlsfiles.Options{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Now:    func() time.Time { return time.Now().Add(48 * time.Hour) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "not valid now") {
		t.Errorf("no warning for a certificate past its not-after time:\n%s", logs.String())
	}
}

// FuzzLoad feeds Load arbitrary certificate, key and CA files: it must
// return an error or a usable configuration, never panic.
func FuzzLoad(f *testing.F) {
	ca := certtest.NewCA(f, "seed CA")
	p := ca.Issue("seed")
	f.Add(p.CertPEM, p.KeyPEM, ca.PEM)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), p.KeyPEM, []byte{})
	f.Add(p.KeyPEM, p.CertPEM, p.CertPEM)
	f.Fuzz(func(t *testing.T, certPEM, keyPEM, caPEM []byte) {
		dir := t.TempDir()
		files := tlsfiles.Files{Cert: filepath.Join(dir, "c"), Key: filepath.Join(dir, "k"), CA: filepath.Join(dir, "ca")}
		for path, data := range map[string][]byte{files.Cert: certPEM, files.Key: keyPEM, files.CA: caPEM} {
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		c, err := tlsfiles.Load(files, tlsfiles.Options{})
		if err != nil {
			return
		}
		if _, err := c.ServerConfig(); err != nil {
			t.Fatalf("loaded, but ServerConfig: %v", err)
		}
		_ = c.ClientConfig("127.0.0.1")
	})
}
