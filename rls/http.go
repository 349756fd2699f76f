package rls

import (
	"errors"
	"io"
	"net/http"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// healthName is the gRPC health service name envoy ratelimit reports on,
// which Kubernetes probes written for it ask for.
const healthName = "ratelimit"

// HTTPHandler serves envoy ratelimit's HTTP endpoints, for a caller to
// mount on its HTTP listener:
//
//   - /json: ShouldRateLimit in JSON (protojson of RateLimitRequest and
//     RateLimitResponse, as envoy ratelimit's /json), answered 200, or 429
//     when the overall code is OVER_LIMIT, or 400 with the error for a
//     request that does not parse or is refused. Like envoy ratelimit's,
//     it reads the body whatever the method, so a GET without one is a
//     400. The body is bounded by MaxMessageBytes (413 beyond it).
//   - GET /healthcheck: 200 "OK" while the server serves, 500 once it is
//     stopping, as envoy ratelimit's.
func (s *Server) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/json", s.serveJSON)
	mux.HandleFunc("GET /healthcheck", func(w http.ResponseWriter, r *http.Request) {
		if s.stopping.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "OK")
	})
	return mux
}

func (s *Server) serveJSON(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxMessageBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, "request larger than 1 MiB", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req rlspb.RateLimitRequest
	if err := protojson.Unmarshal(body, &req); err != nil {
		s.metrics.invalidRequests.Inc()
		http.Error(w, "not a RateLimitRequest in JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := s.ShouldRateLimit(r.Context(), &req)
	if err != nil {
		http.Error(w, status.Convert(err).Message(), http.StatusBadRequest)
		return
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if resp.OverallCode == rlspb.RateLimitResponse_OVER_LIMIT {
		w.WriteHeader(http.StatusTooManyRequests)
	}
	w.Write(out)
}
