package cloudmap_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
	"github.com/aws/aws-sdk-go-v2/service/servicediscovery/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/gateway"
	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/limiter/memory"
)

// node is one tollgate gateway with the registry as the cloudmap upstream.
type node struct {
	reg   *cloudmap.Registry
	srv   *httptest.Server
	clock *limitertest.Clock
}

// newNode starts a gateway whose memory store and registry both read clock.
func newNode(t *testing.T, clock *limitertest.Clock, opts cloudmap.Options) *node {
	t.Helper()
	if opts.Now == nil {
		opts.Now = clock.Now
	}
	reg, err := cloudmap.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.Options{
		Limiter:  memory.New(memory.Options{Now: clock.Now}),
		Handlers: map[string]http.Handler{"cloudmap": reg},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return &node{reg: reg, srv: srv, clock: clock}
}

// disableHostPrefix keeps the SDK from sending DiscoverInstances to
// data-127.0.0.1, as examples/cloudmap-discover does.
func disableHostPrefix(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("DisableHostPrefix",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			return next.HandleInitialize(smithyhttp.DisableEndpointHostPrefix(ctx, true), in)
		}), middleware.Before)
}

func (n *node) client(accessKey string) *sd.Client {
	return sd.New(sd.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(n.srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, "secret", ""),
		Retryer:      connectionRetryer(),
		APIOptions:   []func(*middleware.Stack) error{disableHostPrefix},
	})
}

// connectionRetryer retries what the SDK's default retryer retries of a
// broken connection, and nothing else: a throttle or an error answer
// reaches the test as the server sent it. Go's HTTP client can lose a
// pooled connection to a race of its own ("use of closed network
// connection" while reading a 200's body, aws-sdk-go-v2 issue 2737),
// which real clients retry; seen here about once in 50 runs under load
// after 40 concurrent registrations.
func connectionRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.Retryables = []retry.IsErrorRetryable{retry.RetryableConnectionError{}}
	})
}

// result is a call's result and error; get fails t on the error.
type result[T any] struct {
	v   T
	err error
}

// must holds a call's result for get: must(call()).get(t).
func must[T any](v T, err error) result[T] { return result[T]{v, err} }

func (r result[T]) get(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

// discovered lists the ids DiscoverInstances answers with, and the revision.
func discovered(t *testing.T, c *sd.Client, in *sd.DiscoverInstancesInput) ([]string, int64) {
	t.Helper()
	out := must(c.DiscoverInstances(context.Background(), in)).get(t)
	var ids []string
	for _, i := range out.Instances {
		ids = append(ids, aws.ToString(i.InstanceId))
	}
	slices.Sort(ids)
	return ids, aws.ToInt64(out.InstancesRevision)
}

func revision(t *testing.T, c *sd.Client, ns, svc string) int64 {
	t.Helper()
	out := must(c.DiscoverInstancesRevision(context.Background(), &sd.DiscoverInstancesRevisionInput{
		NamespaceName: aws.String(ns), ServiceName: aws.String(svc)})).get(t)
	return aws.ToInt64(out.InstancesRevision)
}

// setup creates namespace "local" and service "web" (custom health) and
// returns the service id.
func setup(t *testing.T, c *sd.Client) (nsID, svcID string) {
	t.Helper()
	ctx := context.Background()
	op := must(c.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{Name: aws.String("local"), CreatorRequestId: aws.String("create-local")})).get(t)
	got := must(c.GetOperation(ctx, &sd.GetOperationInput{OperationId: op.OperationId})).get(t)
	nsID = got.Operation.Targets["NAMESPACE"]
	svc := must(c.CreateService(ctx, &sd.CreateServiceInput{
		Name: aws.String("web"), NamespaceId: aws.String(nsID),
		HealthCheckCustomConfig: &types.HealthCheckCustomConfig{},
	})).get(t)
	return nsID, aws.ToString(svc.Service.Id)
}

func TestSDKNamespaceServiceInstancesDiscover(t *testing.T) {
	clock := limitertest.NewClock()
	n := newNode(t, clock, cloudmap.Options{OperationDelay: 2 * time.Second})
	c := n.client("AKIDFLOW")
	ctx := context.Background()

	created := clock.Now()
	op := must(c.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{
		Name: aws.String("local"), CreatorRequestId: aws.String("req-ns"), Description: aws.String("test")})).get(t)
	got := must(c.GetOperation(ctx, &sd.GetOperationInput{OperationId: op.OperationId})).get(t)
	if got.Operation.Status != types.OperationStatusSubmitted || got.Operation.Type != types.OperationTypeCreateNamespace {
		t.Fatalf("operation at once: %s %s, want SUBMITTED CREATE_NAMESPACE", got.Operation.Status, got.Operation.Type)
	}
	clock.Advance(2 * time.Second)
	got = must(c.GetOperation(ctx, &sd.GetOperationInput{OperationId: op.OperationId})).get(t)
	if got.Operation.Status != types.OperationStatusSuccess {
		t.Fatalf("operation after the delay: %s, want SUCCESS", got.Operation.Status)
	}
	nsID := got.Operation.Targets["NAMESPACE"]
	// A retry with the same CreatorRequestId answers the first OperationId.
	again := must(c.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{Name: aws.String("local"), CreatorRequestId: aws.String("req-ns")})).get(t)
	if aws.ToString(again.OperationId) != aws.ToString(op.OperationId) {
		t.Fatalf("retried CreateHttpNamespace: operation %s, want the first one %s", aws.ToString(again.OperationId), aws.ToString(op.OperationId))
	}
	ns := must(c.GetNamespace(ctx, &sd.GetNamespaceInput{Id: aws.String(nsID)})).get(t)
	if aws.ToString(ns.Namespace.Name) != "local" || ns.Namespace.Type != types.NamespaceTypeHttp ||
		aws.ToString(ns.Namespace.Properties.HttpProperties.HttpName) != "local" || ns.Namespace.CreateDate == nil ||
		!ns.Namespace.CreateDate.Equal(created) {
		t.Fatalf("GetNamespace: %+v", ns.Namespace)
	}
	svc := must(c.CreateService(ctx, &sd.CreateServiceInput{
		Name: aws.String("web"), NamespaceId: aws.String(nsID), HealthCheckCustomConfig: &types.HealthCheckCustomConfig{}})).get(t)
	svcID := aws.ToString(svc.Service.Id)
	if svc.Service.Type != types.ServiceTypeHttp || aws.ToString(svc.Service.NamespaceId) != nsID {
		t.Fatalf("CreateService: %+v", svc.Service)
	}

	rev := revision(t, c, "local", "web")
	register := func(id, ip, stage, az string) string {
		t.Helper()
		out := must(c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: aws.String(svcID), InstanceId: aws.String(id),
			Attributes: map[string]string{"AWS_INSTANCE_IPV4": ip, "AWS_INSTANCE_PORT": "8080", "stage": stage, "az": az}})).get(t)
		if r := revision(t, c, "local", "web"); r <= rev {
			t.Fatalf("revision after registering %s: %d, not above %d", id, r, rev)
		} else {
			rev = r
		}
		return aws.ToString(out.OperationId)
	}
	register("i-1", "10.0.0.1", "prod", "a")
	register("i-2", "10.0.0.2", "prod", "b")
	register("i-3", "10.0.0.3", "canary", "b")

	all := &sd.DiscoverInstancesInput{NamespaceName: aws.String("local"), ServiceName: aws.String("web")}
	ids, r := discovered(t, c, all)
	if !slices.Equal(ids, []string{"i-1", "i-2", "i-3"}) || r != rev {
		t.Fatalf("discover all: %v rev %d, want i-1 i-2 i-3 rev %d", ids, r, rev)
	}
	out := must(c.DiscoverInstances(ctx, all)).get(t)
	first := out.Instances[0]
	if first.Attributes["AWS_INSTANCE_IPV4"] == "" || first.HealthStatus != types.HealthStatusHealthy ||
		aws.ToString(first.NamespaceName) != "local" || aws.ToString(first.ServiceName) != "web" {
		t.Fatalf("instance summary: %+v", first)
	}
	for _, tc := range []struct {
		name     string
		query    map[string]string
		optional map[string]string
		want     []string
	}{
		{"query", map[string]string{"stage": "prod"}, nil, []string{"i-1", "i-2"}},
		{"query two keys", map[string]string{"stage": "prod", "az": "b"}, nil, []string{"i-2"}},
		{"query no match", map[string]string{"stage": "dev"}, nil, nil},
		{"optional narrows", map[string]string{"stage": "prod"}, map[string]string{"az": "a"}, []string{"i-1"}},
		{"optional ignored when nothing matches", map[string]string{"stage": "prod"}, map[string]string{"az": "z"}, []string{"i-1", "i-2"}},
	} {
		in := *all
		in.QueryParameters, in.OptionalParameters = tc.query, tc.optional
		if ids, _ := discovered(t, c, &in); !slices.Equal(ids, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, ids, tc.want)
		}
	}
	max := *all
	max.MaxResults = aws.Int32(2)
	if ids, _ := discovered(t, c, &max); len(ids) != 2 {
		t.Errorf("MaxResults 2: %v", ids)
	}

	// Health: i-3 unhealthy.
	must(c.UpdateInstanceCustomHealthStatus(ctx, &sd.UpdateInstanceCustomHealthStatusInput{
		ServiceId: aws.String(svcID), InstanceId: aws.String("i-3"), Status: types.CustomHealthStatusUnhealthy})).get(t)
	// The model: "The health status updates don't update InstancesRevision."
	if r := revision(t, c, "local", "web"); r != rev {
		t.Fatalf("revision after a health change: %d, want it unchanged at %d", r, rev)
	}
	hs := must(c.GetInstancesHealthStatus(ctx, &sd.GetInstancesHealthStatusInput{ServiceId: aws.String(svcID)})).get(t)
	if hs.Status["i-3"] != types.HealthStatusUnhealthy || hs.Status["i-1"] != types.HealthStatusHealthy || len(hs.Status) != 3 {
		t.Fatalf("GetInstancesHealthStatus: %v", hs.Status)
	}
	for _, tc := range []struct {
		filter types.HealthStatusFilter
		want   []string
	}{
		{types.HealthStatusFilterHealthy, []string{"i-1", "i-2"}},
		{types.HealthStatusFilterUnhealthy, []string{"i-3"}},
		{types.HealthStatusFilterAll, []string{"i-1", "i-2", "i-3"}},
		{types.HealthStatusFilterHealthyOrElseAll, []string{"i-1", "i-2"}},
	} {
		in := *all
		in.HealthStatus = tc.filter
		if ids, _ := discovered(t, c, &in); !slices.Equal(ids, tc.want) {
			t.Errorf("HealthStatus %s: %v, want %v", tc.filter, ids, tc.want)
		}
	}
	// Only i-3 matches canary and it is unhealthy: HEALTHY_OR_ELSE_ALL fails open.
	open := *all
	open.HealthStatus, open.QueryParameters = types.HealthStatusFilterHealthyOrElseAll, map[string]string{"stage": "canary"}
	if ids, _ := discovered(t, c, &open); !slices.Equal(ids, []string{"i-3"}) {
		t.Errorf("HEALTHY_OR_ELSE_ALL with no healthy match: %v, want [i-3]", ids)
	}

	// A retried RegisterInstance (same CreatorRequestId) changes nothing.
	in := &sd.RegisterInstanceInput{ServiceId: aws.String(svcID), InstanceId: aws.String("i-4"), CreatorRequestId: aws.String("req-i4"),
		Attributes: map[string]string{"AWS_INSTANCE_IPV4": "10.0.0.4"}}
	op1 := must(c.RegisterInstance(ctx, in)).get(t)
	rev = revision(t, c, "local", "web")
	op2 := must(c.RegisterInstance(ctx, in)).get(t)
	if aws.ToString(op1.OperationId) != aws.ToString(op2.OperationId) || revision(t, c, "local", "web") != rev {
		t.Fatalf("retried RegisterInstance: operations %s, %s and revision moved", aws.ToString(op1.OperationId), aws.ToString(op2.OperationId))
	}

	// Deregister, discover again.
	for _, id := range []string{"i-2", "i-4"} {
		dop := must(c.DeregisterInstance(ctx, &sd.DeregisterInstanceInput{ServiceId: aws.String(svcID), InstanceId: aws.String(id)})).get(t)
		o := must(c.GetOperation(ctx, &sd.GetOperationInput{OperationId: dop.OperationId})).get(t)
		if o.Operation.Type != types.OperationTypeDeregisterInstance || o.Operation.Targets["INSTANCE"] != id {
			t.Fatalf("deregister operation: %+v", o.Operation)
		}
	}
	ids, r = discovered(t, c, all)
	if !slices.Equal(ids, []string{"i-1", "i-3"}) || r <= rev {
		t.Fatalf("after deregistering i-2 and i-4: %v rev %d (was %d)", ids, r, rev)
	}
	li := must(c.ListInstances(ctx, &sd.ListInstancesInput{ServiceId: aws.String(svcID)})).get(t)
	if len(li.Instances) != 2 || aws.ToString(li.Instances[0].Id) != "i-1" || li.Instances[0].Attributes["stage"] != "prod" {
		t.Fatalf("ListInstances: %+v", li.Instances)
	}
	gi := must(c.GetInstance(ctx, &sd.GetInstanceInput{ServiceId: aws.String(svcID), InstanceId: aws.String("i-3")})).get(t)
	if gi.Instance.Attributes["stage"] != "canary" {
		t.Fatalf("GetInstance: %+v", gi.Instance)
	}
	ls := must(c.ListServices(ctx, &sd.ListServicesInput{Filters: []types.ServiceFilter{{
		Name: types.ServiceFilterNameNamespaceId, Values: []string{nsID}, Condition: types.FilterConditionEq}}})).get(t)
	if len(ls.Services) != 1 || aws.ToInt32(ls.Services[0].InstanceCount) != 2 {
		t.Fatalf("ListServices: %+v", ls.Services)
	}
	gs := must(c.GetService(ctx, &sd.GetServiceInput{Id: aws.String(svcID)})).get(t)
	if aws.ToString(gs.Service.Name) != "web" || gs.Service.HealthCheckCustomConfig == nil {
		t.Fatalf("GetService: %+v", gs.Service)
	}
	// Tear down in order.
	for _, id := range []string{"i-1", "i-3"} {
		must(c.DeregisterInstance(ctx, &sd.DeregisterInstanceInput{ServiceId: aws.String(svcID), InstanceId: aws.String(id)})).get(t)
	}
	must(c.DeleteService(ctx, &sd.DeleteServiceInput{Id: aws.String(svcID)})).get(t)
	must(c.DeleteNamespace(ctx, &sd.DeleteNamespaceInput{Id: aws.String(nsID)})).get(t)
	if l := must(c.ListNamespaces(ctx, &sd.ListNamespacesInput{})).get(t); len(l.Namespaces) != 0 {
		t.Fatalf("namespaces left: %+v", l.Namespaces)
	}
}

func TestSDKPrivateDNSNamespaceAndPagination(t *testing.T) {
	n := newNode(t, limitertest.NewClock(), cloudmap.Options{})
	c := n.client("AKIDPAGE")
	ctx := context.Background()
	for i := range 5 {
		must(c.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{Name: aws.String(fmt.Sprintf("ns%d", i))})).get(t)
	}
	must(c.CreatePrivateDnsNamespace(ctx, &sd.CreatePrivateDnsNamespaceInput{Name: aws.String("corp.internal"), Vpc: aws.String("vpc-1")})).get(t)
	var names []string
	p := sd.NewListNamespacesPaginator(c, &sd.ListNamespacesInput{MaxResults: aws.Int32(2)})
	pages := 0
	for p.HasMorePages() {
		out := must(p.NextPage(ctx)).get(t)
		pages++
		for _, ns := range out.Namespaces {
			names = append(names, aws.ToString(ns.Name))
		}
	}
	slices.Sort(names)
	if pages != 3 || len(names) != 6 || names[0] != "corp.internal" {
		t.Fatalf("%d pages: %v", pages, names)
	}
	dns := must(c.ListNamespaces(ctx, &sd.ListNamespacesInput{Filters: []types.NamespaceFilter{{
		Name: types.NamespaceFilterNameType, Values: []string{"DNS_PRIVATE"}, Condition: types.FilterConditionEq}}})).get(t)
	if len(dns.Namespaces) != 1 || dns.Namespaces[0].Type != types.NamespaceTypeDnsPrivate || dns.Namespaces[0].Properties.DnsProperties == nil {
		t.Fatalf("TYPE filter: %+v", dns.Namespaces)
	}
	nsID := aws.ToString(dns.Namespaces[0].Id)
	svc := must(c.CreateService(ctx, &sd.CreateServiceInput{Name: aws.String("db"), DnsConfig: &types.DnsConfig{
		NamespaceId: aws.String(nsID), DnsRecords: []types.DnsRecord{{Type: types.RecordTypeA, TTL: aws.Int64(60)}}}})).get(t)
	if svc.Service.Type != types.ServiceTypeDnsHttp || svc.Service.DnsConfig == nil || aws.ToInt64(svc.Service.DnsConfig.DnsRecords[0].TTL) != 60 {
		t.Fatalf("DNS service: %+v", svc.Service)
	}
	// An A record needs an address.
	_, err := c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: svc.Service.Id, InstanceId: aws.String("db-1"),
		Attributes: map[string]string{"role": "primary"}})
	var ii *types.InvalidInput
	if !errors.As(err, &ii) || !strings.Contains(ii.ErrorMessage(), "AWS_INSTANCE_IPV4") {
		t.Fatalf("register without an address into an A-record service: %v", err)
	}
	// Without a health check, discovery reports UNKNOWN and ignores the filter.
	must(c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: svc.Service.Id, InstanceId: aws.String("db-1"),
		Attributes: map[string]string{"AWS_INSTANCE_IPV4": "192.168.0.1"}})).get(t)
	out := must(c.DiscoverInstances(ctx, &sd.DiscoverInstancesInput{NamespaceName: aws.String("corp.internal"),
		ServiceName: aws.String("db"), HealthStatus: types.HealthStatusFilterUnhealthy})).get(t)
	if len(out.Instances) != 1 || out.Instances[0].HealthStatus != types.HealthStatusUnknown {
		t.Fatalf("discover in a service without health checks: %+v", out.Instances)
	}
}

func TestSDKThrottledDiscoverIsStillRequestLimitExceeded(t *testing.T) {
	clock := limitertest.NewClock()
	n := newNode(t, clock, cloudmap.Options{})
	c := n.client("AKIDTHROTTLE")
	ctx := context.Background()
	setup(t, c)
	in := &sd.DiscoverInstancesInput{NamespaceName: aws.String("local"), ServiceName: aws.String("web")}
	must(c.DiscoverInstances(ctx, in)).get(t)
	// Drain the 19,999 tokens left in one native take.
	resp, err := http.Post(n.srv.URL+"/v1/take", "application/json", strings.NewReader(
		`{"service":"cloudmap","account":"AKIDTHROTTLE","region":"us-east-1","action":"DiscoverInstances","tokens":19999}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("draining take: %v %v", resp, err)
	}
	resp.Body.Close()
	_, err = c.DiscoverInstances(ctx, in)
	isA[*types.RequestLimitExceeded](t, "drained DiscoverInstances", err)
	// The control plane and DiscoverInstancesRevision have their own buckets.
	must(c.ListNamespaces(ctx, &sd.ListNamespacesInput{})).get(t)
	must(c.DiscoverInstancesRevision(ctx, &sd.DiscoverInstancesRevisionInput{NamespaceName: aws.String("local"), ServiceName: aws.String("web")})).get(t)
	clock.Advance(time.Millisecond) // 1,000/s: one token
	if ids, _ := discovered(t, c, in); len(ids) != 0 {
		t.Fatalf("discover after a refill: %v", ids)
	}
}

func TestSDKControlPlaneBucket(t *testing.T) {
	clock := limitertest.NewClock() // frozen: no refill
	n := newNode(t, clock, cloudmap.Options{})
	c := n.client("AKIDCONTROL")
	ctx := context.Background()
	ok, throttled := 0, 0
	for range 110 {
		_, err := c.ListNamespaces(ctx, &sd.ListNamespacesInput{})
		var api smithy.APIError
		switch {
		case err == nil:
			ok++
		case errors.As(err, &api) && api.ErrorCode() == "ThrottlingException" && api.ErrorMessage() == "Rate exceeded":
			// As AWS answers a throttled control-plane call; the
			// SDK's retryer counts it as throttling.
			throttled++
		default:
			t.Fatalf("ListNamespaces: %v", err)
		}
	}
	if ok != 100 || throttled != 10 {
		t.Fatalf("110 control-plane calls at one instant: %d ok, %d throttled; want 100 and 10", ok, throttled)
	}
	// Discovery is not in the control-plane bucket.
	_, err := c.DiscoverInstances(ctx, &sd.DiscoverInstancesInput{NamespaceName: aws.String("local"), ServiceName: aws.String("web")})
	isA[*types.NamespaceNotFound](t, "DiscoverInstances with the control plane drained", err)
}

// Accounts and regions have registries of their own.
func TestSDKScopes(t *testing.T) {
	n := newNode(t, limitertest.NewClock(), cloudmap.Options{})
	ctx := context.Background()
	setup(t, n.client("AKIDONE"))
	_, err := n.client("AKIDTWO").DiscoverInstances(ctx, &sd.DiscoverInstancesInput{NamespaceName: aws.String("local"), ServiceName: aws.String("web")})
	isA[*types.NamespaceNotFound](t, "another account", err)
	eu := sd.New(sd.Options{Region: "eu-west-1", BaseEndpoint: aws.String(n.srv.URL), Retryer: connectionRetryer(),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDONE", "s", ""), APIOptions: []func(*middleware.Stack) error{disableHostPrefix}})
	_, err = eu.DiscoverInstances(ctx, &sd.DiscoverInstancesInput{NamespaceName: aws.String("local"), ServiceName: aws.String("web")})
	isA[*types.NamespaceNotFound](t, "another region", err)
}
