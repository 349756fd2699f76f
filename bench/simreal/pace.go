package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/tollgate/tollgate/pool"
)

// trace is one paced load against a real pool: GET / at rate(t) with
// constant spacing for seconds whole seconds, at most 1,000 requests in
// flight (one more is counted as failed, not sent).
type trace struct {
	seconds int
	rate    func(t time.Duration) float64
	// before, when set, is called before each send and each sample with
	// the time since the start (the scenario's own events).
	before func(t time.Duration)
	// sample is called at the end of each second.
	sample func()
	// answered, when set, is given the start of each 200 answer's body.
	answered func(body []byte)
}

// play runs t against p's service through a local HTTP server and
// returns how many requests failed (not answered 200).
func (t trace) play(p *pool.Pool, service string) int64 {
	srv := httptest.NewServer(p.Handler(service))
	defer srv.Close()
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 1000}}
	var wg sync.WaitGroup
	var failed atomic.Int64
	slots := make(chan struct{}, 1000)
	start := time.Now()
	nextSample, next := start.Add(time.Second), start
	for sampled := 0; sampled < t.seconds; {
		now := time.Now()
		if t.before != nil {
			t.before(now.Sub(start))
		}
		if !now.Before(nextSample) {
			t.sample()
			sampled++
			nextSample = nextSample.Add(time.Second)
		}
		if !now.Before(next) {
			select {
			case slots <- struct{}{}:
				wg.Go(func() {
					defer func() { <-slots }()
					resp, err := client.Get(srv.URL + "/")
					if err != nil {
						failed.Add(1)
						return
					}
					body, _ := io.ReadAll(io.LimitReader(resp.Body, 100))
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						failed.Add(1)
						return
					}
					if t.answered != nil {
						t.answered(body)
					}
				})
			default:
				failed.Add(1) // over the in-flight bound: counted, not sent
			}
			next = next.Add(time.Duration(float64(time.Second) / t.rate(next.Sub(start))))
		}
		time.Sleep(min(time.Until(next), time.Until(nextSample), 10*time.Millisecond))
	}
	wg.Wait()
	return failed.Load()
}

// runPool applies specs to a new pool logging warnings to stderr, runs it
// and returns it with the function that stops it.
func runPool(specs []pool.ServiceSpec) (*pool.Pool, func(), error) {
	p := pool.New(pool.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err := p.Apply(specs); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	return p, func() { cancel(); <-done }, nil
}

// intLine is ys as a plot line, second i+1 at x.
func intLine(ys []int) plotter.XYs {
	xy := make(plotter.XYs, len(ys))
	for i, y := range ys {
		xy[i].X, xy[i].Y = float64(i+1), float64(y)
	}
	return xy
}
