package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/replay"
	"github.com/tollgate/tollgate/sim"
)

// agreeCall is one ECS call at a second after the clock's start.
type agreeCall struct {
	sec    int
	action string
	body   string
}

// agreeCalls: 30 Fargate RunTasks of 10 tasks in one second (the tasks
// bucket of 100 throttles the 11th on), RunTasks whose members are in
// another letter case (unknown members to ECS's JSON protocol: ECS's
// bucket only), Spot, EC2, a count past 10 (refused as invalid, taking
// nothing), reads, and more Fargate RunTasks once the buckets refilled
// part-way.
func agreeCalls() []agreeCall {
	var cs []agreeCall
	add := func(sec, n int, action, body string) {
		for range n {
			cs = append(cs, agreeCall{sec, action, body})
		}
	}
	add(0, 30, "RunTask", `{"taskDefinition":"web","launchType":"FARGATE","count":10}`)
	add(0, 4, "RunTask", `{"taskDefinition":"web","LaunchType":"FARGATE","Count":10}`)
	add(0, 3, "RunTask", `{"capacityProviderStrategy":[{"capacityProvider":"FARGATE_SPOT","weight":1}],"count":5}`)
	add(0, 2, "RunTask", `{"launchType":"EC2","count":10}`)
	add(0, 1, "RunTask", `{"launchType":"FARGATE","count":11}`)
	add(0, 5, "DescribeTasks", `{"tasks":["a"]}`)
	add(2, 8, "RunTask", `{"launchType":"FARGATE","count":3}`)
	add(2, 25, "RunTask", `{"capacityProviderStrategy":[{"capacityProvider":"FARGATE","weight":1,"base":2},{"capacityProvider":"FARGATE_SPOT","weight":3}],"count":10}`)
	add(9, 40, "RunTask", `{"launchType":"FARGATE","count":1}`)
	return cs
}

// TestServeAndReplayChargeAlike plays the same ECS calls through tollgate
// serve's AWS JSON endpoint and, as CloudTrail records them (the request
// as requestParameters), through replay without retries: every bucket
// allows and throttles the same calls.
func TestServeAndReplayChargeAlike(t *testing.T) {
	clock := limitertest.NewClock()
	start := clock.Now()
	reg := prometheus.NewRegistry()
	_, srv := newTestServer(t, clock, Options{Registry: reg})
	const akid = "AKIDAGREE"
	auth := sigv4(akid, "us-east-1", "ecs")

	var trail bytes.Buffer
	trail.WriteString(`{"Records":[`)
	sec := 0
	statuses := map[int]int{}
	for i, c := range agreeCalls() {
		if c.sec != sec {
			clock.Advance(time.Duration(c.sec-sec) * time.Second)
			sec = c.sec
		}
		resp := awsRequest(t, srv.URL, ecsTarget+c.action, auth, c.body)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses[resp.StatusCode]++
		if i > 0 {
			trail.WriteByte(',')
		}
		fmt.Fprintf(&trail, `{"eventTime":%q,"eventSource":"ecs.amazonaws.com","eventName":%q,"awsRegion":"us-east-1","userIdentity":{"accessKeyId":%q},"requestParameters":%s}`,
			start.Add(time.Duration(c.sec)*time.Second).UTC().Format(time.RFC3339), c.action, akid, c.body)
	}
	trail.WriteString(`]}`)
	if statuses[http.StatusOK] == 0 || statuses[http.StatusBadRequest] < 2 {
		t.Fatalf("serve answered %v: want some calls allowed and some throttled or refused", statuses)
	}

	serve := serveDecisions(t, reg)
	data := trail.Bytes()
	rep, err := replay.Run([]replay.Input{{Name: "trail.json", Open: func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}}}, replay.Options{Groups: []replay.Group{{Name: "once", Retry: sim.Retry{Disabled: true}}}, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Refused != 1 {
		t.Errorf("replay refused %d calls, want 1 (the count of 11)", rep.Refused)
	}
	got := map[string][2]int64{}
	for _, b := range rep.Buckets {
		got[b.Category] = [2]int64{b.Attempts - b.ThrottledAttempts, b.ThrottledAttempts}
		if b.Throttled != b.ThrottledAttempts {
			t.Errorf("%s: replay's throttled without retries %d, its throttled attempts %d: one attempt a call, they must agree", b.Category, b.Throttled, b.ThrottledAttempts)
		}
	}
	for cat, want := range serve {
		if got[cat] != want {
			t.Errorf("%s: replay allowed, throttled %v; serve %v", cat, got[cat], want)
		}
	}
	for cat := range got {
		if _, ok := serve[cat]; !ok {
			t.Errorf("%s: replay charged it, serve did not", cat)
		}
	}
	if serve["fargate-on-demand-tasks"][1] == 0 || serve["fargate-spot-tasks"][0] == 0 {
		t.Errorf("serve's Fargate buckets %v: the calls must throttle on On-Demand tasks and take from Spot", serve)
	}
}

// serveDecisions returns the gateway's ECS decisions by category:
// allowed and throttled.
func serveDecisions(t *testing.T, reg *prometheus.Registry) map[string][2]int64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]int64{}
	for _, mf := range mfs {
		if mf.GetName() != "tollgate_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["service"] != "ecs" || m.GetCounter().GetValue() == 0 {
				continue
			}
			v := out[l["category"]]
			switch l["result"] {
			case "allowed":
				v[0] += int64(m.GetCounter().GetValue())
			case "throttled":
				v[1] += int64(m.GetCounter().GetValue())
			default:
				t.Fatalf("serve decided %s: %s", l["category"], l["result"])
			}
			out[l["category"]] = v
		}
	}
	if len(out) == 0 {
		b, _ := json.Marshal(mfs)
		t.Fatalf("no ECS decisions in serve's metrics: %s", strings.TrimSpace(string(b)))
	}
	return out
}
