package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/smithy-go"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/replay"
)

// TestReplayAgreesWithServe: one recorded trace, replayed by `tollgate
// replay` on its virtual clock and sent in real time through a node with
// the Go SDK, gives the same throttled calls per account. The limits
// refill one token in 10 s, so the real run's timing may be seconds off
// the trace's without changing a decision (a real-time test with wide
// margins).
func TestReplayAgreesWithServe(t *testing.T) {
	const cfgText = `services:
  - preset: ecs
access_keys:
  AKIDREPLAYA: "111100000001"
  AKIDREPLAYB: "111100000002"
overrides:
  - {service: ecs, account: "111100000001", category: cluster-modify, capacity: 20, refill_per_second: 0.1}
  - {service: ecs, account: "111100000002", category: cluster-modify, capacity: 20, refill_per_second: 0.1}
`
	// The trace: A sends 30 UpdateCluster at once; B sends 15 at once and
	// 10 more 5 s later (5 left + 0.5 refilled: 5 admitted).
	type burst struct {
		key, account string
		at           time.Duration
		n            int
	}
	trace := []burst{{"AKIDREPLAYA", "111100000001", 0, 30}, {"AKIDREPLAYB", "111100000002", 0, 15}, {"AKIDREPLAYB", "111100000002", 5 * time.Second, 10}}
	start := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	var lines strings.Builder
	for _, b := range trace {
		for range b.n {
			fmt.Fprintf(&lines, `{"eventTime":%q,"eventSource":"ecs.amazonaws.com","eventName":"UpdateCluster","awsRegion":"us-east-1","userIdentity":{"accessKeyId":%q,"accountId":%q}}`+"\n",
				start.Add(b.at).Format(time.RFC3339), b.key, b.account)
		}
	}
	dir := t.TempDir()
	cfgPath := writeFile(t, dir, "tollgate.yaml", cfgText)
	cfg, err := config.Load(context.Background(), cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	text := lines.String()
	rep, err := replay.Run([]replay.Input{{Name: "trace.json", Open: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(text)), nil }}},
		replay.Options{Quota: cfg.Quota})
	if err != nil {
		t.Fatal(err)
	}
	replayed := map[string]int64{}
	for _, b := range rep.Buckets {
		replayed[b.Account] += b.Throttled
	}

	var logs logtest.Buffer
	n := newTestNode(t, &logs, Options{ConfigPath: cfgPath})
	run(t, n, &logs)
	clients := map[string]*ecs.Client{}
	for _, b := range trace {
		clients[b.key] = ecs.New(ecs.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + n.Addr().String()),
			Credentials: credentials.NewStaticCredentialsProvider(b.key, "x", ""), Retryer: aws.NopRetryer{}})
	}
	var mu sync.Mutex
	served := map[string]int64{}
	t0 := time.Now()
	for _, at := range []time.Duration{0, 5 * time.Second} {
		time.Sleep(time.Until(t0.Add(at)))
		var wg sync.WaitGroup
		for _, b := range trace {
			if b.at != at {
				continue
			}
			for range b.n {
				wg.Go(func() {
					_, err := clients[b.key].UpdateCluster(context.Background(), &ecs.UpdateClusterInput{Cluster: aws.String("default")})
					var ae smithy.APIError
					if errors.As(err, &ae) && ae.ErrorCode() == "ThrottlingException" {
						mu.Lock()
						served[b.account]++
						mu.Unlock()
					} else if err != nil {
						t.Errorf("%s: %v", b.key, err)
					}
				})
			}
		}
		wg.Wait()
	}
	if took := time.Since(t0); took > 9*time.Second {
		t.Logf("the real run took %v: past the 10 s a token takes, the comparison may not hold", took)
	}
	want := map[string]int64{"111100000001": 10, "111100000002": 5} // the bucket arithmetic
	for acct, w := range want {
		if replayed[acct] != w || served[acct] != w {
			t.Errorf("account %s: replay throttled %d, serve %d; the bucket arithmetic says %d", acct, replayed[acct], served[acct], w)
		}
	}
	if t.Failed() {
		t.Logf("the node's log:\n%s", logs.String())
	}
}
