package rls_test

import (
	"context"
	"fmt"
	"net"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tollgate/tollgate/rls"
)

// A config file of envoy ratelimit, served over gRPC and asked three times
// about one phone number: a bucket of 2 marketing messages a day.
func Example() {
	cfg, err := rls.Parse([]rls.File{{Name: "messaging.yaml", Data: []byte(`
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 2
`)}}, rls.LoadOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := rls.New(rls.Options{Config: cfg})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- srv.Run(ctx, ln) }()
	defer func() { stop(); <-done }()

	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	client := rlspb.NewRateLimitServiceClient(conn)
	req := &rlspb.RateLimitRequest{Domain: "messaging", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{
			{Key: "message_type", Value: "marketing"},
			{Key: "to_number", Value: "2061111111"},
		},
	}}}
	for range 3 {
		resp, err := client.ShouldRateLimit(ctx, req)
		if err != nil {
			fmt.Println(err)
			return
		}
		st := resp.Statuses[0]
		fmt.Println(resp.OverallCode, st.CurrentLimit.RequestsPerUnit, st.CurrentLimit.Unit, "remaining", st.LimitRemaining)
	}
	// Output:
	// OK 2 DAY remaining 1
	// OK 2 DAY remaining 0
	// OVER_LIMIT 2 DAY remaining 0
}

// Every problem of a config directory is reported with its file, line,
// column and field.
func ExampleParse_errors() {
	_, err := rls.Parse([]rls.File{{Name: "config/edge.yaml", Data: []byte(`
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: seconds, requests_per_unit: 10}
  - key: remote_address
    rate_limit: {unlimited: true}
`)}}, rls.LoadOptions{})
	fmt.Println(err)
	// Output:
	// config/edge.yaml:5:24: descriptors[0].rate_limit.unit: invalid rate limit unit "seconds": want second, minute, hour, day, week, month or year
	// config/edge.yaml:6:10: descriptors[1].key: duplicate descriptor composite key "edge.remote_address" (first at line 4)
}
