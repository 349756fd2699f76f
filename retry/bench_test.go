package retry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// zeroClock performs every wait at once without recording it.
type zeroClock struct{}

func (zeroClock) Now() time.Time                                   { return time.Time{} }
func (zeroClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func BenchmarkExponentialDelay(b *testing.B) {
	rnd := seeded()
	for i := 0; b.Loop(); i++ {
		_ = DefaultSchedule().Delay(i&7, 0, rnd)
	}
}

func BenchmarkDoFirstAttempt(b *testing.B) {
	p := New(WithClock(zeroClock{}))
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	for b.Loop() {
		if err := p.Do(ctx, fn); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDoThreeRetries(b *testing.B) {
	p := New(WithClock(zeroClock{}), WithRand(seeded()))
	ctx := context.Background()
	for b.Loop() {
		calls := 0
		err := p.Do(ctx, func(context.Context) error {
			calls++
			if calls <= 3 {
				return errUnavailable
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTransportOverhead measures a GET through Transport against one
// through the bare transport, both to a local server answering 200.
func BenchmarkTransportOverhead(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	for _, c := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"bare", http.DefaultTransport},
		{"retry", &Transport{}},
	} {
		b.Run(c.name, func(b *testing.B) {
			client := &http.Client{Transport: c.rt}
			for b.Loop() {
				resp, err := client.Get(srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}
