package sim

import (
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/bucket"
)

// TestScalerAgreesWithRun plays Run's arrivals (a constant rate with a
// step, fixed service times, a bucket that never throttles) through a
// Scaler: every second's instances, requests and 429s must be Run's.
func TestScalerAgreesWithRun(t *testing.T) {
	b := Backend{ServiceTime: 300 * time.Millisecond, Distribution: Fixed, ColdStart: 3 * time.Second,
		Autoscale: autoscale.Config{MaxConcurrency: 4, MaxInstances: 6}}
	sc := Scenario{
		Duration: 90 * time.Second,
		Target:   Target{Service: "ecs", Action: "ListTasks"},
		Limit:    bucket.MustLimit(1e6, 1e6),
		Clients:  []Clients{{Rate: 20, Process: Constant, Steps: []Step{{At: 30 * time.Second, Rate: 200}, {At: 60 * time.Second, Rate: 5}}}},
		Retry:    Retry{Disabled: true},
		Backend:  b,
	}
	res, err := Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	var got []Second
	s, err := NewScaler(b, 0, func(sec Second) { got = append(got, sec) })
	if err != nil {
		t.Fatal(err)
	}
	arrive := func(from, to time.Duration, rate float64) {
		for k := 0; ; k++ {
			at := from + time.Duration(float64(k)*1e9/rate+0.5)
			if at >= to {
				return
			}
			if err := s.Arrive(at, b.ServiceTime); err != nil {
				t.Fatal(err)
			}
		}
	}
	arrive(0, 30*time.Second, 20)
	arrive(30*time.Second, 60*time.Second, 200)
	arrive(60*time.Second, 90*time.Second, 5)
	st, err := s.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < len(res.Seconds) {
		t.Fatalf("%d seconds, Run has %d", len(got), len(res.Seconds))
	}
	var rejected int
	for i, want := range res.Seconds[:len(res.Seconds)-1] { // Run's last second ends with the run
		g := got[i]
		if g.Starting != want.Starting || g.Ready != want.Ready || g.Draining != want.Draining ||
			g.Admitted != want.Admitted || g.Rejected != want.Rejected || g.Pending != want.Pending || g.Recommended != want.Recommended {
			t.Fatalf("second %d: got %+v\nRun's %+v", i, g, want)
		}
		rejected += g.Rejected
	}
	if rejected == 0 || st.ColdStarts < 2 || st.PeakInstances != 6 {
		t.Errorf("the step should fill max instances and reject: %+v", st)
	}
	if st.Requests != int64(res.Summary.Calls) || st.Served+st.Rejected != st.Requests {
		t.Errorf("stats %+v, Run's calls %d", st, res.Summary.Calls)
	}
	if st.Pending == 0 || st.WaitP99 < st.WaitP50 || st.WaitP99 == 0 {
		t.Errorf("waits: %+v", st)
	}
}

func TestScalerTimeoutAndOrder(t *testing.T) {
	s, err := NewScaler(Backend{ColdStart: time.Second}, 2*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Arrive(time.Second, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.Arrive(time.Second, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.Arrive(0, time.Second); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("out of order: %v", err)
	}
	if err := s.Arrive(2*time.Second, -time.Second); err == nil {
		t.Fatal("negative service time accepted")
	}
	st, err := s.Finish()
	if err != nil {
		t.Fatal(err)
	}
	// Both waited the 1 s cold start; the first then ran 1 s, cut at 2 s.
	if st.OverTimeout != 1 || st.Served != 2 || st.Pending != 2 || st.WaitP50 != time.Second || st.ColdStarts != 1 {
		t.Errorf("%+v", st)
	}
	// One instance of one slot: the first request runs from 1 s and is
	// cut at 2 s; the two others are abandoned pending at 2 s.
	s, err = NewScaler(Backend{ColdStart: time.Second, Autoscale: autoscale.Config{MaxInstances: 1, MaxConcurrency: 1}}, 2*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.Arrive(0, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	st, err = s.Finish()
	if err != nil || st.OverTimeout != 3 || st.Served != 1 || st.Rejected != 0 || st.Pending != 3 || st.WaitP99 != 2*time.Second || st.Seconds != 3 {
		t.Errorf("%+v, %v", st, err)
	}
	if _, err := NewScaler(Backend{None: true}, 0, nil); err == nil {
		t.Error("NewScaler without a backend")
	}
}
