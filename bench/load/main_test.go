package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
)

// A figure per server CPU-second comes only from at least -min-server-cpu
// of the server's CPU; below it the report gives the CPU and says to run
// longer.
func TestCPUReportRefusesFewTicks(t *testing.T) {
	line, refusal := cpuReport(37, 100000, 2*time.Second)
	if line != "server_cpu_seconds=0.37 server_cpu_ticks=37" {
		t.Errorf("line %q", line)
	}
	if !strings.Contains(refusal, "37 ticks") || !strings.Contains(refusal, "200 ticks") || !strings.Contains(refusal, "run longer") {
		t.Errorf("refusal %q", refusal)
	}
	line, refusal = cpuReport(200, 100000, 2*time.Second)
	if line != "server_cpu_seconds=2.00 server_cpu_ticks=200 decisions_per_server_cpu_second=50000" || refusal != "" {
		t.Errorf("at 200 ticks: %q, %q", line, refusal)
	}
	// No CPU at all is refused even with the floor off: no division by 0.
	if line, refusal = cpuReport(0, 5, 0); strings.Contains(line, "per_server") || refusal == "" {
		t.Errorf("0 ticks, -min-server-cpu 0: %q, %q", line, refusal)
	}
	if line, _ = cpuReport(1, 5, 0); !strings.HasSuffix(line, "decisions_per_server_cpu_second=500") {
		t.Errorf("1 tick, -min-server-cpu 0: %q", line)
	}
}

func TestCPUTicksReadsThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	n, err := cpuTicks(os.Getpid())
	if err != nil || n < 0 {
		t.Fatalf("%d, %v", n, err)
	}
	if _, err := cpuTicks(0); err == nil {
		t.Error("pid 0 reads without error")
	}
}

// -actions narrows the takes to the actions given (bench/peers.sh: one
// bucket per account, as gubernator's one key per account).
func TestBuildRequestActions(t *testing.T) {
	o := options{mode: "take", url: "http://x", keys: 10, actions: []string{"DescribeClusters"}}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		var body bytes.Buffer
		req := buildRequest(context.Background(), o, rng, &body)
		if req.URL.Path != "/v1/take" || !strings.Contains(body.String(), `"action":"DescribeClusters"`) {
			t.Fatalf("%s %s", req.URL, body.String())
		}
	}
	o.mode, o.batch, o.actions = "batch", 20, []string{"ListTasks", "DescribeTasks"}
	var body bytes.Buffer
	buildRequest(context.Background(), o, rng, &body)
	if n := strings.Count(body.String(), `"action":"ListTasks"`) + strings.Count(body.String(), `"action":"DescribeTasks"`); n != 20 {
		t.Errorf("%d of 20 takes on the actions given: %s", n, body.String())
	}
}
