package main

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/smithy-go"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	grpccreds "google.golang.org/grpc/credentials"

	"github.com/tollgate/tollgate/internal/certtest"
	"github.com/tollgate/tollgate/internal/redistest"
)

// TestServeTLSEverywhere runs two `tollgate serve` nodes with every
// connection over TLS: HTTPS on --listen, mutual TLS on the gRPC
// listener, and a rediss:// store whose redis-server requires a client
// certificate. A real ECS client over HTTPS, alternating between them,
// is admitted what one shared bucket admits.
func TestServeTLSEverywhere(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "test CA")
	caFile := ca.WriteCA(dir, "ca.crt")
	redisCert, redisKey := ca.Issue("redis").Write(t, dir, "redis")
	clientCert, clientKey := ca.Issue("tollgate").Write(t, dir, "client")
	serverCert, serverKey := ca.Issue("tollgate server").Write(t, dir, "server")
	rs := redistest.StartTLS(t, redistest.TLS{Cert: redisCert, Key: redisKey, CA: caFile, ClientCert: clientCert, ClientKey: clientKey})
	rlsDir := filepath.Join(dir, "ratelimit")
	if err := os.Mkdir(rlsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rlsDir, "edge.yaml"), []byte("domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--store", rs.URL(), "--store-timeout", "10s", // a timeout no loaded machine reaches: every decision is Redis's
		"--store-tls-ca", caFile, "--store-tls-cert", clientCert, "--store-tls-key", clientKey,
		"--tls-cert", serverCert, "--tls-key", serverKey,
		"--rls-config", rlsDir, "--grpc-listen", "127.0.0.1:0",
		"--grpc-tls-cert", serverCert, "--grpc-tls-key", serverKey, "--grpc-tls-client-ca", caFile,
	}
	a, b := startServer(t, args...), startServer(t, args...)
	var grpcLine string
	for _, s := range []*server{a, b} {
		line := s.waitLog(t, "envoy rate limit service listening")
		if !strings.Contains(line, "tls=mtls") {
			t.Errorf("gRPC listener not under mTLS: %s", line)
		}
		if grpcLine == "" {
			grpcLine = line
		}
	}

	httpClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, ForceAttemptHTTP2: true}}
	client := func(addr string) *ecs.Client {
		return ecs.New(ecs.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String("https://" + addr),
			Credentials:  credentials.NewStaticCredentialsProvider("AKIDTLSNODES", "secret", ""),
			Retryer:      aws.NopRetryer{},
			HTTPClient:   httpClient,
		})
	}
	clients := []*ecs.Client{client(a.addr), client(b.addr)}
	ctx := context.Background()
	start := time.Now()
	ok := 0
	for i := range 80 {
		_, err := clients[i%2].DescribeClusters(ctx, &ecs.DescribeClustersInput{})
		if err == nil {
			ok++
			continue
		}
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ThrottlingException" {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if bound := 50 + int(time.Since(start).Seconds()*20) + 1; ok < 50 || ok > bound {
		t.Fatalf("two nodes on one rediss store admitted %d of 80; want 50 plus refill (at most %d)", ok, bound)
	}

	// gRPC: Envoy with its client certificate is answered, a client
	// without one is not.
	m := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(grpcLine)
	if m == nil {
		t.Fatalf("no address in %q", grpcLine)
	}
	envoy, err := tls.LoadX509KeyPair(clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	call := func(cfg *tls.Config) error {
		conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(grpccreds.NewTLS(cfg)))
		if err != nil {
			return err
		}
		defer conn.Close()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err = rlspb.NewRateLimitServiceClient(conn).ShouldRateLimit(cctx, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}},
		}})
		return err
	}
	if err := call(&tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{envoy}}); err != nil {
		t.Errorf("gRPC with a client certificate: %v", err)
	}
	if err := call(&tls.Config{RootCAs: ca.Pool()}); err == nil {
		t.Error("gRPC under mTLS answered a client without a certificate")
	}
}

// TestServeTLSFileErrors: a missing certificate file stops serve at
// start with an error naming the flag and the file.
func TestServeTLSFileErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.crt")
	code, _, errs := runCmd("serve", "--listen", "127.0.0.1:0", "--tls-cert", missing, "--tls-key", missing)
	if code != 1 || !strings.Contains(errs, "--tls-cert") || !strings.Contains(errs, missing) {
		t.Errorf("serve with a missing certificate: exit %d, stderr %q; want 1 naming --tls-cert and the file", code, errs)
	}
}
