package sim

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/retry"
)

// playBurst plays n calls at one instant on a 50/20 bucket and returns the
// attempts the observer saw.
func playBurst(t *testing.T, rt Retry, n int) []Attempt {
	t.Helper()
	p, err := NewPlayer([]Retry{rt}, 1)
	if err != nil {
		t.Fatal(err)
	}
	var got []Attempt
	p.Observe = func(a Attempt) { got = append(got, a) }
	b := p.AddBucket(bucket.MustLimit(50, 20))
	at := int64(1_800_000_000) * int64(time.Second)
	for range n {
		if err := p.Arrive(at, b, 0); err != nil {
			t.Fatal(err)
		}
	}
	p.Finish()
	if p.Waiting() != 0 {
		t.Fatalf("%d calls still waiting after Finish", p.Waiting())
	}
	return got
}

func TestPlayerThrottlesAsTheBucketSays(t *testing.T) {
	got := playBurst(t, Retry{Disabled: true}, 60)
	allowed, gaveUp := 0, 0
	for _, a := range got {
		if a.Allowed {
			allowed++
		}
		if a.GaveUp {
			gaveUp++
		}
	}
	if len(got) != 60 || allowed != 50 || gaveUp != 10 {
		t.Fatalf("60 calls at once on 50/20 without retries: %d attempts, %d allowed, %d gave up; want 60, 50, 10", len(got), allowed, gaveUp)
	}
}

// With waits of exactly 1 s the ten throttled calls retry when 20 tokens
// have refilled: all of them pass on their second attempt.
func TestPlayerRetriesOnTheClock(t *testing.T) {
	got := playBurst(t, Retry{Schedule: WithoutJitter(retry.DefaultSchedule())}, 60)
	if len(got) != 70 {
		t.Fatalf("%d attempts, want 70", len(got))
	}
	start := got[0].At
	for _, a := range got[60:] {
		if !a.Allowed || a.N != 2 || a.At-start != int64(time.Second) {
			t.Fatalf("retry %+v: want allowed, attempt 2, 1 s after the burst", a)
		}
	}
}

func TestPlayerRefusesUnboundedRetries(t *testing.T) {
	if _, err := NewPlayer([]Retry{{Deadline: -1}}, 1); !errors.Is(err, ErrUnboundedRetry) {
		t.Fatalf("no deadline and no attempt cap: %v, want ErrUnboundedRetry", err)
	}
	if _, err := NewPlayer(nil, 1); err == nil {
		t.Fatal("no client group: no error")
	}
	if _, err := NewPlayer([]Retry{{}, {Budget: Budget{Kind: "lavish"}}}, 1); !errors.Is(err, ErrInvalidScenario) || !strings.Contains(err.Error(), "client group 1: retry.budget.kind: unknown budget") {
		t.Fatalf("an unknown budget: %v", err)
	}
	p, err := NewPlayer([]Retry{{MaxAttempts: 3, Deadline: -1}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Arrive(0, 0, 0); err == nil {
		t.Fatal("arrival on a bucket never added: no error")
	}
}
