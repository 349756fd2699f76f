// Command noop is the floor peer of the side-by-side benchmarks: a server
// that moves the bytes tollgate moves and decides nothing.
//
// With -answer it is a net/http server (bench/batch.sh, bench/peers.sh):
// it reads each POST body to its end, as tollgate does, and answers with
// the bytes of an answer tollgate gave (the file -answer), so that the
// two servers read and write the same bytes per request.
//
// With -grpc it is a grpc-go server of Envoy's rate limit service
// (bench/peers.sh): every ShouldRateLimit is answered OK, with one status
// per descriptor shaped as tollgate's (code OK, the limit 50 per second,
// 49 remaining, reset in 20 ms), so both servers encode answers of the same size.
//
//	noop -addr 127.0.0.1:9000 -answer answer.json
//	noop -grpc 127.0.0.1:9001
package main

import (
	"context"
	"flag"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "HTTP listen address (with -answer)")
	answer := flag.String("answer", "", "file whose bytes every HTTP request is answered with")
	grpcAddr := flag.String("grpc", "", "serve Envoy's rate limit service over gRPC on this address instead of HTTP")
	flag.Parse()
	if *grpcAddr != "" {
		log.Fatal(serveRLS(*grpcAddr))
	}
	body, err := os.ReadFile(*answer)
	if err != nil {
		log.Fatal(err)
	}
	length := strconv.Itoa(len(body))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", length)
		w.Write(body)
	})
	log.Fatal(http.ListenAndServe(*addr, h))
}

// serveRLS serves the no-op rate limit service on addr until it fails.
func serveRLS(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	rlspb.RegisterRateLimitServiceServer(srv, noopRLS{})
	return srv.Serve(ln)
}

// noopRLS admits everything.
type noopRLS struct {
	rlspb.UnimplementedRateLimitServiceServer
}

var limit = &rlspb.RateLimitResponse_RateLimit{RequestsPerUnit: 50, Unit: rlspb.RateLimitResponse_RateLimit_SECOND}

var reset = durationpb.New(20 * time.Millisecond)

func (noopRLS) ShouldRateLimit(_ context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	st := make([]*rlspb.RateLimitResponse_DescriptorStatus, len(req.GetDescriptors()))
	for i := range st {
		st[i] = &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK, CurrentLimit: limit, LimitRemaining: 49, DurationUntilReset: reset}
	}
	return &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK, Statuses: st}, nil
}
