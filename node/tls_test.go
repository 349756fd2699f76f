package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/certtest"
	"github.com/tollgate/tollgate/internal/logtest"
)

// tlsSetup is a CA and the files of a node's two TLS listeners.
type tlsSetup struct {
	dir      string
	ca       *certtest.CA
	caFile   string
	http     certtest.Pair // the HTTP listener's certificate
	grpc     certtest.Pair // the gRPC listener's certificate
	client   tls.Certificate
	httpTLS  config.TLS
	grpcTLS  config.TLS // with the CA as client CA: mTLS
	rlsDir   string
	nodeOpts Options
}

func newTLSSetup(t *testing.T) *tlsSetup {
	t.Helper()
	s := &tlsSetup{dir: t.TempDir(), ca: certtest.NewCA(t, "test CA")}
	s.caFile = s.ca.WriteCA(s.dir, "ca.crt")
	s.http, s.grpc = s.ca.Issue("http"), s.ca.Issue("grpc")
	s.httpTLS.CertFile, s.httpTLS.KeyFile = s.http.Write(t, s.dir, "http")
	s.grpcTLS.CertFile, s.grpcTLS.KeyFile = s.grpc.Write(t, s.dir, "grpc")
	s.grpcTLS.CAFile = s.caFile
	envoy := s.ca.Issue("envoy")
	kp, err := tls.X509KeyPair(envoy.CertPEM, envoy.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	s.client = kp
	s.rlsDir = filepath.Join(s.dir, "ratelimit")
	if err := os.Mkdir(s.rlsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, s.rlsDir, "edge.yaml", "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 1}\n")
	s.nodeOpts = Options{TLS: s.httpTLS, RLS: RLSOptions{ConfigDir: s.rlsDir, TLS: s.grpcTLS}}
	return s
}

// httpsGet fetches path over a new HTTPS connection that trusts only
// the CA, and returns the status, the protocol and the serial number of
// the server's certificate.
func (s *tlsSetup) httpsGet(n *Node, path string) (int, string, *big.Int, error) {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.ca.Pool()}, ForceAttemptHTTP2: true, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	resp, err := c.Get("https://" + n.Addr().String() + path)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Proto, resp.TLS.PeerCertificates[0].SerialNumber, nil
}

// grpcCall asks the gRPC listener's health service about "ratelimit"
// over a new connection with creds, and returns the serial number of the
// server's certificate.
func grpcCall(n *Node, creds credentials.TransportCredentials) (*big.Int, error) {
	conn, err := grpc.NewClient(n.RLSAddr().String(), grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "ratelimit"})
	if err != nil {
		return nil, err
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		return nil, fmt.Errorf("health of ratelimit: %v", resp.Status)
	}
	var p peer.Peer
	if _, err := rlspb.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}},
	}}, grpc.Peer(&p)); err != nil {
		return nil, err
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil, fmt.Errorf("the call was not over TLS: %v", p.AuthInfo)
	}
	return info.State.PeerCertificates[0].SerialNumber, nil
}

func (s *tlsSetup) mtlsCreds() credentials.TransportCredentials {
	return credentials.NewTLS(&tls.Config{RootCAs: s.ca.Pool(), Certificates: []tls.Certificate{s.client}})
}

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
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not within a minute; last: %s", what, last)
}

func sameSerial(got *big.Int, err error, want certtest.Pair) (bool, string) {
	if err != nil {
		return false, err.Error()
	}
	return got.Cmp(want.Leaf.SerialNumber) == 0, "serial " + got.String() + ", want " + want.Leaf.SerialNumber.String()
}

// TestTLSListeners: HTTPS (HTTP/2) on the HTTP listener, mutual TLS on
// the gRPC listener; a client without a certificate and a plaintext
// client are refused; both certificates rotate without a restart.
func TestTLSListeners(t *testing.T) {
	s := newTLSSetup(t)
	var logs logtest.Buffer
	n := newTestNode(t, &logs, s.nodeOpts)
	run(t, n, &logs)

	status, proto, serial, err := s.httpsGet(n, "/healthz")
	if err != nil || status != 200 || proto != "HTTP/2.0" || serial.Cmp(s.http.Leaf.SerialNumber) != 0 {
		t.Fatalf("GET https /healthz: %d %s serial %v, %v; want 200 over HTTP/2 with the http certificate", status, proto, serial, err)
	}
	if status, _, _, err := s.httpsGet(n, "/healthcheck"); err != nil || status != 200 {
		t.Errorf("GET https /healthcheck (envoy ratelimit's probe): %d, %v", status, err)
	}
	if resp, err := http.Get("http://" + n.Addr().String() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("plaintext HTTP to the HTTPS listener answered 200")
		}
	}
	if got, err := grpcCall(n, s.mtlsCreds()); err != nil || got.Cmp(s.grpc.Leaf.SerialNumber) != 0 {
		t.Fatalf("gRPC with a client certificate: serial %v, %v", got, err)
	}
	if _, err := grpcCall(n, credentials.NewTLS(&tls.Config{RootCAs: s.ca.Pool()})); err == nil {
		t.Error("gRPC under mTLS answered a client without a certificate")
	}
	stranger := certtest.NewCA(t, "another CA").Issue("intruder")
	kp, err := tls.X509KeyPair(stranger.CertPEM, stranger.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := grpcCall(n, credentials.NewTLS(&tls.Config{RootCAs: s.ca.Pool(), Certificates: []tls.Certificate{kp}})); err == nil {
		t.Error("gRPC under mTLS answered a client whose certificate another CA signed")
	}
	if _, err := grpcCall(n, insecure.NewCredentials()); err == nil {
		t.Error("gRPC under TLS answered a plaintext client")
	}
	for _, want := range []string{"tls=tls", "tls=mtls", "TLS files loaded"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}

	// cert-manager renews both certificates: served without a restart.
	httpNext, grpcNext := s.ca.Issue("http renewed"), s.ca.Issue("grpc renewed")
	httpNext.Write(t, s.dir, "http")
	grpcNext.Write(t, s.dir, "grpc")
	eventually(t, "the renewed HTTPS certificate served", func() (bool, string) {
		_, _, got, err := s.httpsGet(n, "/healthz")
		return sameSerial(got, err, httpNext)
	})
	eventually(t, "the renewed gRPC certificate served", func() (bool, string) {
		got, err := grpcCall(n, s.mtlsCreds())
		return sameSerial(got, err, grpcNext)
	})
}

// TestTLSReloadKeepsCertificateOnBadFile: a reload (SIGHUP, the admin
// endpoint) re-reads the certificate files too; a bad file is an error
// naming it, and the certificate in use stays.
func TestTLSReloadKeepsCertificateOnBadFile(t *testing.T) {
	s := newTLSSetup(t)
	var logs logtest.Buffer
	n := newTestNode(t, &logs, Options{TLS: s.httpTLS})
	if err := os.WriteFile(s.httpTLS.CertFile, []byte("renewal went wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reloaded, err := n.Reload(context.Background())
	if err == nil || !strings.Contains(err.Error(), "tls: ") || !strings.Contains(err.Error(), s.httpTLS.CertFile) {
		t.Errorf("Reload with a bad certificate file: %v, want a tls error naming %s", err, s.httpTLS.CertFile)
	}
	if strings.Join(reloaded, ",") != PartConfig {
		t.Errorf("reloaded %v, want only %s", reloaded, PartConfig)
	}
	run(t, n, &logs)
	if _, _, got, err := s.httpsGet(n, "/healthz"); err != nil || got.Cmp(s.http.Leaf.SerialNumber) != 0 {
		t.Errorf("after a bad reload: serial %v, %v; want the certificate loaded at start", got, err)
	}
	if !strings.Contains(logs.String(), "TLS files not reloaded") {
		t.Errorf("the bad file is not logged:\n%s", logs.String())
	}
}

// TestTLSStartErrors: a missing or bad file at start is an error naming
// the file and where it was given; TLS files with nothing to secure are
// refused rather than ignored.
func TestTLSStartErrors(t *testing.T) {
	s := newTLSSetup(t)
	missing := filepath.Join(s.dir, "missing.crt")
	cfgFile := writeFile(t, s.dir, "tollgate.yaml", "services:\n  - preset: ecs\nrls:\n  config_dir: ratelimit\n  tls: {cert_file: missing.crt, key_file: grpc.key}\n")
	for _, tc := range []struct {
		name string
		opts Options
		want []string
	}{
		{"missing HTTP cert", Options{TLS: config.TLS{CertFile: missing, KeyFile: s.httpTLS.KeyFile}}, []string{"--tls-cert: ", missing}},
		{"HTTP key of another cert", Options{TLS: config.TLS{CertFile: s.httpTLS.CertFile, KeyFile: s.grpcTLS.KeyFile}}, []string{"--tls-cert, --tls-key: ", s.httpTLS.CertFile, s.grpcTLS.KeyFile, "does not match"}},
		{"HTTP client CA only", Options{TLS: config.TLS{CAFile: s.caFile}}, []string{"--tls-cert, --tls-key: CA file", "needs a certificate"}},
		{"missing gRPC client CA", Options{RLS: RLSOptions{ConfigDir: s.rlsDir, TLS: config.TLS{CertFile: s.grpcTLS.CertFile, KeyFile: s.grpcTLS.KeyFile, CAFile: missing}}}, []string{"--grpc-tls-client-ca: CA file", missing}},
		{"config's rls.tls", Options{ConfigPath: cfgFile}, []string{cfgFile + ": rls.tls.cert_file: certificate file", filepath.Join(s.dir, "missing.crt")}},
		{"gRPC TLS without rls", Options{RLS: RLSOptions{TLS: s.grpcTLS}}, []string{"no rls config directory"}},
		{"store TLS with memory", Options{Store: config.Store{TLS: config.TLS{CAFile: s.caFile}}}, []string{"--store-tls-ca", "memory"}},
		{"store TLS with redis://", Options{Store: config.Store{URL: "redis://127.0.0.1:1/0", TLS: config.TLS{CAFile: s.caFile}}}, []string{"--store-tls-ca", "not a TLS Redis URL"}},
		{"missing store CA", Options{Store: config.Store{URL: "rediss://127.0.0.1:1/0", TLS: config.TLS{CAFile: missing}}}, []string{"--store-tls-ca: CA file", missing}},
	} {
		tc.opts.Listen = "127.0.0.1:0"
		if tc.opts.RLS.ConfigDir != "" || tc.opts.ConfigPath != "" {
			tc.opts.RLS.GRPCListen = "127.0.0.1:0"
		}
		n, err := New(context.Background(), tc.opts)
		if err == nil {
			n.Close()
			t.Errorf("%s: started", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", tc.name, err, w)
			}
		}
	}
	// A missing key blames the key's flag alone.
	_, err := New(context.Background(), Options{Listen: "127.0.0.1:0", TLS: config.TLS{CertFile: s.httpTLS.CertFile, KeyFile: missing}})
	if err == nil || !strings.HasPrefix(err.Error(), "--tls-key: key file: ") {
		t.Errorf("missing HTTP key: %v; want it to begin with --tls-key alone", err)
	}
}

// TestBrokenFilesAreRefusedBeforeTheStoreIsDialled: a missing rls config
// directory or TLS file is reported without a connection to the store,
// so a Redis that is down does not delay the error that names the file.
func TestBrokenFilesAreRefusedBeforeTheStoreIsDialled(t *testing.T) {
	s := newTLSSetup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var dials atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			c.Close()
		}
	}()
	store := config.Store{URL: "redis://" + ln.Addr().String() + "/0"}
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"missing rls dir", Options{RLS: RLSOptions{ConfigDir: filepath.Join(s.dir, "nope"), GRPCListen: "127.0.0.1:0"}}, "--rls-config: "},
		{"missing HTTP key", Options{TLS: config.TLS{CertFile: s.httpTLS.CertFile, KeyFile: filepath.Join(s.dir, "nope.key")}}, "--tls-key: "},
	} {
		tc.opts.Listen, tc.opts.Store = "127.0.0.1:0", store
		n, err := New(context.Background(), tc.opts)
		if err == nil {
			n.Close()
			t.Fatalf("%s: started", tc.name)
		}
		if !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v; want it to begin with %q", tc.name, err, tc.want)
		}
	}
	time.Sleep(100 * time.Millisecond) // let a dial, if one was made, be accepted
	if got := dials.Load(); got != 0 {
		t.Errorf("the store was dialled %d times before a broken file was refused", got)
	}
	// A good config does dial it: the listener above is what the store reaches.
	if n, err := New(context.Background(), Options{Listen: "127.0.0.1:0", Store: store}); err == nil {
		n.Close()
	}
	if got := dials.Load(); got == 0 {
		t.Fatal("the store was never dialled, even for a good config: the test sees nothing")
	}
}
