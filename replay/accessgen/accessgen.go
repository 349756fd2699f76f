// Package accessgen writes HTTP access logs of a known shape, for tests,
// benchmarks and examples of package replay's autoscaling: requests to a
// service at steady rates, phase by phase, each running a known time, in
// nginx's combined format (with $request_time), AWS ALB's or Envoy's.
package accessgen

import (
	"bufio"
	"container/heap"
	"fmt"
	"io"
	"math"
	"time"
)

// Phase is a span of steady traffic.
type Phase struct {
	// Duration is the phase's length.
	Duration time.Duration
	// Rate is the requests a second, evenly spaced: the k-th of the phase
	// arrives round(k × 1e9 / Rate) ns after its start, as sim's constant
	// process places its calls.
	Rate float64
}

// Spec is the shape of one log.
type Spec struct {
	// Format is "combined", "alb" or "envoy".
	Format string
	// Start is the time of the first phase's start.
	Start time.Time
	// Host and Path are every request's; Path "/" when empty.
	Host, Path string
	// Phases follow one another.
	Phases []Phase
	// Service are the requests' service times, taken in turn: the k-th
	// request runs Service[k % len(Service)]. Give them in whole
	// milliseconds: the logs write milliseconds.
	Service []time.Duration
}

// Request is one request of a log.
type Request struct {
	// At is its arrival, from Spec.Start.
	At time.Duration
	// Service is how long it runs.
	Service time.Duration
}

// Requests calls f with every request of the log, in arrival order.
func (s Spec) Requests(f func(Request)) {
	var from time.Duration
	n := 0
	for _, p := range s.Phases {
		if p.Rate > 0 {
			for k := 0; ; k++ {
				at := from + time.Duration(math.Round(float64(k)*1e9/p.Rate))
				if at >= from+p.Duration {
					break
				}
				svc := time.Millisecond
				if len(s.Service) > 0 {
					svc = s.Service[n%len(s.Service)]
				}
				n++
				f(Request{At: at, Service: svc})
			}
		}
		from += p.Duration
	}
}

// Write writes the log, each line when its request ends, as servers
// log: in order of the requests' ends.
func Write(w io.Writer, s Spec) error {
	switch s.Format {
	case "combined", "alb", "envoy":
	default:
		return fmt.Errorf("accessgen: unknown format %q", s.Format)
	}
	if s.Path == "" {
		s.Path = "/"
	}
	bw := bufio.NewWriter(w)
	var open ends
	flush := func(upTo time.Duration) {
		for len(open) > 0 && open[0].At+open[0].Service <= upTo {
			s.line(bw, heap.Pop(&open).(Request))
		}
	}
	s.Requests(func(r Request) {
		flush(r.At)
		heap.Push(&open, r)
	})
	flush(math.MaxInt64)
	return bw.Flush()
}

func (s Spec) line(w io.Writer, r Request) {
	start := s.Start.Add(r.At).UTC()
	end := start.Add(r.Service)
	secs := fmt.Sprintf("%.3f", r.Service.Seconds())
	switch s.Format {
	case "combined":
		fmt.Fprintf(w, "203.0.113.7 - - [%s] \"GET %s HTTP/1.1\" 200 512 \"-\" \"accessgen\" %s\n",
			end.Format("02/Jan/2006:15:04:05 -0700"), s.Path, secs)
	case "alb":
		host := s.Host
		if host == "" {
			host = "example.com"
		}
		fmt.Fprintf(w, "https %s app/my-lb/50dc6c495c0c9188 203.0.113.7:46532 10.0.0.1:80 0.000 %s 0.000 200 200 34 366 \"GET https://%s:443%s HTTP/1.1\" \"accessgen\" ECDHE-RSA-AES128-GCM-SHA256 TLSv1.2 arn:aws:elasticloadbalancing:us-east-2:123456789012:targetgroup/my-targets/73e2d6bc24d8a067 \"Root=1-58337262-36d228ad5d99923122bbe354\" \"%s\" \"-\" 0 %s \"forward\" \"-\" \"-\" \"10.0.0.1:80\" \"200\" \"-\" \"-\"\n",
			end.Format("2006-01-02T15:04:05.000000Z"), secs, host, s.Path, host, start.Format("2006-01-02T15:04:05.000000Z"))
	case "envoy":
		fmt.Fprintf(w, "[%s] \"GET %s HTTP/1.1\" 200 - 0 512 %d %d \"-\" \"accessgen\" \"5ab3f3c8-2d2f-4a0e-9d4a-1c7c5ad0e1f1\" \"%s\" \"10.0.0.1:8080\"\n",
			start.Format("2006-01-02T15:04:05.000Z"), s.Path, r.Service.Milliseconds(), r.Service.Milliseconds(), s.Host)
	}
}

// ends is a min-heap of requests by their end.
type ends []Request

func (h ends) Len() int           { return len(h) }
func (h ends) Less(i, j int) bool { return h[i].At+h[i].Service < h[j].At+h[j].Service }
func (h ends) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *ends) Push(x any)        { *h = append(*h, x.(Request)) }
func (h *ends) Pop() any {
	old := *h
	r := old[len(old)-1]
	*h = old[:len(old)-1]
	return r
}
