package cloudmap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/limiter/limitertest"
)

// The AWS CLI (v1, botocore's model) drives every operation through a
// gateway, and parses each answer by the model; error answers carry the
// model's codes. It goes through the server as an HTTP proxy, so that
// DiscoverInstances' data- host prefix needs no DNS.
func TestAWSCLIEveryOperation(t *testing.T) {
	t.Parallel() // its own node and aws processes
	bin, err := exec.LookPath("aws")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("the aws CLI is not installed; CI=true requires it")
		}
		t.Skip("the aws CLI is not installed (pip install awscli): skipping the CLI check of every Cloud Map operation")
	}
	if testing.Short() {
		t.Skip("-short: the CLI check runs the aws CLI about 50 times")
	}
	n := newNode(t, limitertest.NewClock(), cloudmap.Options{})
	u, _ := url.Parse(n.srv.URL)
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID=AKIDCLI", "AWS_SECRET_ACCESS_KEY=secret", "AWS_DEFAULT_REGION=us-east-1",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_MAX_ATTEMPTS=1",
		"HTTP_PROXY="+n.srv.URL, "http_proxy="+n.srv.URL, "NO_PROXY=", "no_proxy=")
	// The calls run in stages, each stage's independent chains at once
	// (at most cliAtOnce aws processes: each is a Python start, mostly
	// CPU), a chain's calls in order; a stage starts when the one before
	// it has ended, as the later chains use what the earlier made. The
	// ~50 calls one after another took 34 s.
	const cliAtOnce = 4
	slots := make(chan struct{}, cliAtOnce)
	var mu sync.Mutex
	done := map[string]bool{}
	// run is called only inside par's functions: on an unexpected error
	// it ends its chain (runtime.Goexit) after failing the test.
	run := func(wantErr, op string, args ...string) map[string]any {
		t.Helper()
		slots <- struct{}{}
		defer func() { <-slots }()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"servicediscovery", op, "--endpoint-url", "http://cloudmap.test:" + u.Port(), "--output", "json"}, args...)...)
		cmd.Env = env
		cmd.WaitDelay = 5 * time.Second // aws may be a shim whose child keeps the pipes
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		t.Logf("aws %s: %v in %v", op, err, time.Since(start))
		mu.Lock()
		done[op] = true
		mu.Unlock()
		if wantErr != "" {
			if err == nil || !strings.Contains(stderr.String(), "("+wantErr+")") {
				t.Errorf("aws %s %v: %v %s, want the error %s", op, args, err, stderr.String(), wantErr)
			}
			return nil
		}
		if err != nil {
			t.Errorf("aws %s %v: %v\n%s", op, args, err, stderr.String())
			runtime.Goexit()
		}
		out := map[string]any{}
		if s := bytes.TrimSpace(stdout.Bytes()); len(s) > 0 {
			if err := json.Unmarshal(s, &out); err != nil {
				t.Errorf("aws %s: %v: %s", op, err, s)
				runtime.Goexit()
			}
		}
		return out
	}
	// par runs chains at once and returns when all have ended, ending the
	// test if one failed.
	par := func(chains ...func()) {
		t.Helper()
		var wg sync.WaitGroup
		for _, c := range chains {
			wg.Go(c)
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	str := func(m map[string]any, path ...string) string {
		var v any = m
		for _, p := range path {
			mm, _ := v.(map[string]any)
			v = mm[p]
		}
		s, _ := v.(string)
		return s
	}
	nsOf := func(op map[string]any) string {
		return str(run("", "get-operation", "--operation-id", str(op, "OperationId")), "Operation", "Targets", "NAMESPACE")
	}

	var httpNS, privNS, pubNS, nsARN string
	par(
		func() { httpNS = nsOf(run("", "create-http-namespace", "--name", "cli", "--tags", "Key=team,Value=a")) },
		func() { privNS = nsOf(run("", "create-private-dns-namespace", "--name", "p.local", "--vpc", "vpc-1")) },
		func() { pubNS = nsOf(run("", "create-public-dns-namespace", "--name", "cli.example.com")) },
	)
	par(
		func() { run("NamespaceAlreadyExists", "create-http-namespace", "--name", "cli") },
		func() { run("", "list-namespaces") },
		func() { nsARN = str(run("", "get-namespace", "--id", httpNS), "Namespace", "Arn") },
		func() { run("NamespaceNotFound", "get-namespace", "--id", "ns-none") },
		func() { run("", "update-http-namespace", "--id", httpNS, "--namespace", "Description=d") },
		func() { run("", "update-private-dns-namespace", "--id", privNS, "--namespace", `{"Description":"p"}`) },
		func() {
			run("", "update-public-dns-namespace", "--id", pubNS, "--namespace", `{"Properties":{"DnsProperties":{"SOA":{"TTL":60}}}}`)
		},
		func() {
			run("InvalidInput", "update-public-dns-namespace", "--id", httpNS, "--namespace", `{"Description":"x"}`)
		},
	)

	var svc, plain, svcARN string
	par(
		func() {
			svc = str(run("", "create-service", "--name", "web", "--namespace-id", httpNS, "--health-check-custom-config", "FailureThreshold=1"), "Service", "Id")
		},
		func() {
			plain = str(run("", "create-service", "--name", "plain", "--namespace-id", httpNS), "Service", "Id")
		},
	)
	par(
		func() { run("ServiceAlreadyExists", "create-service", "--name", "web", "--namespace-id", httpNS) },
		func() { run("ServiceNotFound", "get-service", "--id", "srv-none") },
		func() { run("", "list-services", "--filters", "Name=NAMESPACE_ID,Values="+nsARN) },
		func() { run("", "update-service", "--id", svc, "--service", "Description=web") },
		func() {
			run("", "update-service-attributes", "--service-id", svc, "--attributes", "a=1,b=2")
			run("", "delete-service-attributes", "--service-id", svc, "--attributes", "a")
			if got := run("", "get-service-attributes", "--service-id", svc); str(got, "ServiceAttributes", "Attributes", "b") != "2" {
				t.Errorf("get-service-attributes: %v", got)
			}
			many := make([]string, 30) // valid alone, 31 beside the "b" already there
			for i := range many {
				many[i] = fmt.Sprintf("k%d=v", i)
			}
			run("ServiceAttributesLimitExceededException", "update-service-attributes", "--service-id", svc, "--attributes", strings.Join(many, ","))
		},
		func() {
			run("", "register-instance", "--service-id", svc, "--instance-id", "i-1", "--attributes", "AWS_INSTANCE_IPV4=10.0.0.1,AWS_INIT_HEALTH_STATUS=UNHEALTHY")
			par := func(fs ...func()) { // inside a chain: no FailNow here
				var wg sync.WaitGroup
				for _, f := range fs {
					wg.Go(f)
				}
				wg.Wait()
			}
			par(
				func() { run("", "get-instance", "--service-id", svc, "--instance-id", "i-1") },
				func() { run("", "list-instances", "--service-id", svc) },
				func() {
					if got := run("", "get-instances-health-status", "--service-id", svc); str(got, "Status", "i-1") != "UNHEALTHY" {
						t.Errorf("get-instances-health-status: %v", got)
					}
				},
			)
			run("", "update-instance-custom-health-status", "--service-id", svc, "--instance-id", "i-1", "--status", "HEALTHY")
			if got := run("", "discover-instances", "--namespace-name", "cli", "--service-name", "web"); !strings.Contains(fmt.Sprint(got), "i-1") {
				t.Errorf("discover-instances: %v", got)
			}
			run("", "discover-instances-revision", "--namespace-name", "cli", "--service-name", "web")
		},
		func() {
			run("InvalidInput", "register-instance", "--service-id", svc, "--instance-id", "i-2", "--attributes", "AWS_INIT_HEALTH_STATUS=MAYBE")
		},
		func() { run("InstanceNotFound", "get-instance", "--service-id", svc, "--instance-id", "i-none") },
		func() {
			run("", "register-instance", "--service-id", plain, "--instance-id", "p-1", "--attributes", "k=")
			run("CustomHealthNotFound", "update-instance-custom-health-status", "--service-id", plain, "--instance-id", "p-1", "--status", "HEALTHY")
		},
		func() {
			run("ServiceNotFound", "discover-instances", "--namespace-name", "cli", "--service-name", "none")
		},
		func() { run("", "list-operations", "--filters", "Name=TYPE,Values=UPDATE_NAMESPACE,Condition=EQ") },
		func() { run("OperationNotFound", "get-operation", "--operation-id", "none") },
		func() {
			if got := run("", "list-tags-for-resource", "--resource-arn", nsARN); !strings.Contains(fmt.Sprint(got), "team") {
				t.Errorf("list-tags-for-resource: %v", got)
			}
		},
		func() {
			svcARN = str(run("", "get-service", "--id", svc), "Service", "Arn")
			run("", "tag-resource", "--resource-arn", svcARN, "--tags", "Key=a,Value=b")
			run("", "untag-resource", "--resource-arn", svcARN, "--tag-keys", "a")
			run("ResourceNotFoundException", "list-tags-for-resource", "--resource-arn", strings.Replace(svcARN, svc, "srv-none", 1))
			tags := make([]string, 201)
			for i := range tags {
				tags[i] = fmt.Sprintf("Key=t%d,Value=v", i)
			}
			run("TooManyTagsException", "tag-resource", append([]string{"--resource-arn", svcARN, "--tags"}, tags...)...)
		},
	)

	par(func() { run("ResourceInUse", "delete-service", "--id", svc) })
	par(
		func() {
			run("", "deregister-instance", "--service-id", svc, "--instance-id", "i-1")
			run("", "delete-service", "--id", svc)
		},
		func() {
			run("", "deregister-instance", "--service-id", plain, "--instance-id", "p-1")
			run("", "delete-service", "--id", plain)
		},
	)
	var dels []func()
	for _, ns := range []string{httpNS, privNS, pubNS} {
		dels = append(dels, func() { run("", "delete-namespace", "--id", ns) })
	}
	par(dels...)
	for _, op := range modelOperations {
		var cli strings.Builder // CreateHttpNamespace -> create-http-namespace
		for i, c := range op {
			if 'A' <= c && c <= 'Z' && i > 0 {
				cli.WriteByte('-')
			}
			cli.WriteRune(c | 0x20)
		}
		if !done[cli.String()] {
			t.Errorf("the CLI check never ran %s", cli.String())
		}
	}
}
