package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
	"github.com/aws/aws-sdk-go-v2/service/servicediscovery/types"

	"github.com/tollgate/tollgate/internal/testservice"
)

// TestServeAutoscaledInstancesInCloudMap: the instances of an autoscaled
// service with a cloud_map section appear in DiscoverInstances (through
// the real SDK, throttled by the cloudmap preset) as they become ready and
// disappear as they are scaled down: a request starts one, min_instances 3
// on reload makes three, min_instances 0 lets them go idle to zero. Each
// time the registry lists exactly the pool's ready instances, at their
// addresses.
func TestServeAutoscaledInstancesInCloudMap(t *testing.T) {
	t.Parallel() // its own servers, files and markers
	marker := fmt.Sprintf("cloudmap-%d", time.Now().UnixNano())
	path := filepath.Join(t.TempDir(), "tollgate.yaml")
	// idle is long until the last step, so that the instance the first
	// request starts stays up until the test sees it listed, however slow
	// the machine (a bounds change keeps the instances).
	write := func(minInstances int, idle string) {
		cfg := fmt.Sprintf(`access_keys:
  AKIDSCALE: "111122223333"
services:
  - preset: cloudmap
  - name: svc
    route: {path_prefix: /t/, strip_prefix: true}
    autoscale:
      command: [%q]
      env: {TOLLGATE_TEST_MARKER: %q}
      min_instances: %d
      max_instances: 3
      idle_timeout: %s
      termination_grace_period: 3s
      cloud_map: {namespace: local, service: svc, account: "111122223333", attributes: {stage: test}}
`, testservice.Build(t), marker, minInstances, idle)
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(0, "1m")
	s := startServerEnv(t, []string{"TOLLGATE_ADMIN_TOKEN=secret"}, "--config", path)
	client := sdClient(s.addr, "AKIDSCALE")
	ctx := context.Background()
	// discovered maps instance id to host:port; an unknown namespace (no
	// instance registered yet) is an empty map.
	discovered := func() map[string]string {
		out, err := client.DiscoverInstances(ctx, &sd.DiscoverInstancesInput{NamespaceName: aws.String("local"), ServiceName: aws.String("svc")})
		var nf *types.NamespaceNotFound
		if errors.As(err, &nf) {
			return map[string]string{}
		}
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, in := range out.Instances {
			a := in.Attributes
			if a["stage"] != "test" || in.HealthStatus != types.HealthStatusHealthy {
				t.Fatalf("instance %s: attributes %v, health %s", aws.ToString(in.InstanceId), a, in.HealthStatus)
			}
			m[aws.ToString(in.InstanceId)] = a["AWS_INSTANCE_IPV4"] + ":" + a["AWS_INSTANCE_PORT"]
		}
		return m
	}
	// ready maps the pool's ready instances to host:port.
	ready := func() map[string]string {
		m := map[string]string{}
		for _, svc := range listPools(t, s.addr).Services {
			for _, in := range svc.Instances {
				if in.State == "ready" {
					m[in.Name] = "127.0.0.1:" + strconv.Itoa(in.Port)
				}
			}
		}
		return m
	}
	waitFor := func(n int, what string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			d, r := discovered(), ready()
			if len(d) == n && len(r) == n && fmt.Sprint(d) == fmt.Sprint(r) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: discovered %v, ready %v; want the same %d", what, d, r, n)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	if d := discovered(); len(d) != 0 {
		t.Fatalf("before any request: %v", d)
	}
	if code, body := getBody(t, "http://"+s.addr+"/t/hello"); code != 200 || !strings.HasPrefix(body, "ok ") {
		t.Fatalf("first request: %d %q", code, body)
	}
	waitFor(1, "after the first request")

	write(3, "1m")
	s.cmd.Process.Signal(syscall.SIGHUP)
	s.waitLog(t, "config reloaded")
	waitFor(3, "with min_instances 3")

	write(0, "1s")
	s.cmd.Process.Signal(syscall.SIGHUP)
	s.waitLog(t, "config reloaded")
	waitFor(0, "idle with min_instances 0")
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()
	waitNoProcesses(t, marker, "tollgate's SIGTERM")
}
