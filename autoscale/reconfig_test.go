package autoscale

import (
	"errors"
	"testing"
	"time"
)

func TestSetConfigRaisesMaxInstancesKeepingInstances(t *testing.T) {
	e, err := New(Config{MaxInstances: 1, MaxConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	r1 := e.Route(t0)
	if !r1.Started {
		t.Fatalf("first request did not start an instance: %+v", r1)
	}
	if _, err := e.InstanceReady(t0.Add(time.Second), r1.Instance); err != nil {
		t.Fatal(err)
	}
	// At max instances a second request can only wait.
	r2 := e.Route(t0.Add(2 * time.Second))
	if r2.Started || r2.Outcome != Queued {
		t.Fatalf("at max instances: %+v", r2)
	}
	if _, err := e.RequestDone(t0.Add(2*time.Second), r2.Request); err != nil {
		t.Fatal(err)
	}
	if err := e.SetConfig(Config{MaxInstances: 3, MaxConcurrency: 1}); err != nil {
		t.Fatal(err)
	}
	if info, ok := e.Instance(r1.Instance); !ok || info.State != Ready || info.InFlight != 1 {
		t.Fatalf("instance after SetConfig: %+v %v", info, ok)
	}
	r3 := e.Route(t0.Add(3 * time.Second))
	if !r3.Started {
		t.Fatalf("raised max instances did not allow a new instance: %+v", r3)
	}
	if got := e.Config().MaxInstances; got != 3 {
		t.Fatalf("MaxInstances = %d", got)
	}
}

func TestSetConfigMinInstancesStartsOnTick(t *testing.T) {
	e, _ := New(Config{})
	t0 := time.Unix(1000, 0)
	if d := e.Tick(t0); len(d.Started) != 0 {
		t.Fatalf("min 0 started %v", d.Started)
	}
	if err := e.SetConfig(Config{MinInstances: 2}); err != nil {
		t.Fatal(err)
	}
	if d := e.Tick(t0.Add(time.Second)); len(d.Started) != 2 || d.Count != 2 {
		t.Fatalf("after min 2: count %d started %v", d.Count, d.Started)
	}
}

func TestSetConfigMaxConcurrencyResetsACT(t *testing.T) {
	e, _ := New(Config{MaxConcurrency: 10})
	t0 := time.Unix(1000, 0)
	r := e.Route(t0)
	e.InstanceReady(t0, r.Instance)
	if err := e.SetConfig(Config{MaxConcurrency: 4}); err != nil {
		t.Fatal(err)
	}
	info, _ := e.Instance(r.Instance)
	if info.ACT != 4 {
		t.Fatalf("ACT after lowering max concurrency to 4: %d", info.ACT)
	}
	if m := e.Metrics(t0); m.ACTCapacity != 4 {
		t.Fatalf("ACT capacity %v, want 4", m.ACTCapacity)
	}
}

func TestSetConfigRejectsInvalidAndKeepsOld(t *testing.T) {
	e, _ := New(Config{MaxInstances: 7})
	err := e.SetConfig(Config{MaxInstances: 2, MinInstances: 5})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v, want ErrInvalidConfig", err)
	}
	if got := e.Config().MaxInstances; got != 7 {
		t.Fatalf("MaxInstances = %d after a rejected SetConfig, want 7", got)
	}
}

func TestWithDefaults(t *testing.T) {
	c := Config{MaxInstances: 3}.WithDefaults()
	if c.MaxInstances != 3 || c.MaxConcurrency != DefaultMaxConcurrency || c.IdleTimeout != DefaultIdleTimeout || c.MinInstances != 0 {
		t.Fatalf("WithDefaults = %+v", c)
	}
}

// A share change scales every ACT value by its ratio instead of resetting
// it to the new maximum concurrency, as a reload's change does.
func TestSetConfigSharedScalesACT(t *testing.T) {
	e, err := New(Config{MaxInstances: 2, MaxConcurrency: 80})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	r := e.Route(t0)
	if _, err := e.InstanceReady(t0.Add(time.Second), r.Instance); err != nil {
		t.Fatal(err)
	}
	e.instances[r.Instance].act = 30 // as if ACT had come down from 80
	e.actSum = 30
	if err := e.SetConfigShared(Config{MaxInstances: 2, MaxConcurrency: 40}); err != nil {
		t.Fatal(err)
	}
	if info, _ := e.Instance(r.Instance); info.ACT != 15 {
		t.Errorf("ACT after halving the share = %d, want 15 (30 × 40/80)", info.ACT)
	}
	if got := e.Metrics(t0.Add(2 * time.Second)).ACTCapacity; got != 15 {
		t.Errorf("ACT capacity = %v, want 15", got)
	}
	if err := e.SetConfigShared(Config{MaxInstances: 2, MaxConcurrency: 1}); err != nil {
		t.Fatal(err)
	}
	if info, _ := e.Instance(r.Instance); info.ACT != 1 {
		t.Errorf("ACT at a share of 1 = %d, want 1", info.ACT)
	}
	// A reload's change (SetConfig) still resets it.
	if err := e.SetConfig(Config{MaxInstances: 2, MaxConcurrency: 20}); err != nil {
		t.Fatal(err)
	}
	if info, _ := e.Instance(r.Instance); info.ACT != 20 {
		t.Errorf("ACT after SetConfig = %d, want 20", info.ACT)
	}
}
