package cloudmap_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
	"github.com/aws/aws-sdk-go-v2/service/servicediscovery/types"

	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/limiter/limitertest"
)

// The tests in this file each hold one departure from AWS that moto's
// servicediscovery tests or botocore's model (servicediscovery/2017-03-14
// service-2.json and examples-1.json) found.

// namespaceID creates a namespace with create and returns its id.
func namespaceID(t *testing.T, c *sd.Client, op *string) string {
	t.Helper()
	return must(c.GetOperation(context.Background(), &sd.GetOperationInput{OperationId: op})).get(t).Operation.Targets["NAMESPACE"]
}

// HealthCheckConfig is for "Public DNS and HTTP namespaces only" (the
// model), and GetService's example is an HTTP service with one: a service
// of an HTTP namespace takes it at creation and in UpdateService, and
// serves it back; a private DNS namespace's service is refused it.
func TestHealthCheckConfigInHTTPNamespaces(t *testing.T) {
	n := newNode(t, limitertest.NewClock(), cloudmap.Options{})
	c := n.client("AKIDHEALTH")
	ctx := context.Background()
	httpNS := namespaceID(t, c, must(c.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{Name: aws.String("example-http.com")})).get(t).OperationId)
	hc := &types.HealthCheckConfig{Type: types.HealthCheckTypeHttps, ResourcePath: aws.String("/"), FailureThreshold: aws.Int32(3)}
	svc := must(c.CreateService(ctx, &sd.CreateServiceInput{Name: aws.String("example-http-service"), NamespaceId: aws.String(httpNS),
		HealthCheckConfig: hc})).get(t).Service
	got := must(c.GetService(ctx, &sd.GetServiceInput{Id: svc.Id})).get(t).Service.HealthCheckConfig
	if got == nil || got.Type != types.HealthCheckTypeHttps || aws.ToString(got.ResourcePath) != "/" || aws.ToInt32(got.FailureThreshold) != 3 {
		t.Fatalf("GetService's HealthCheckConfig: %+v", got)
	}
	must(c.UpdateService(ctx, &sd.UpdateServiceInput{Id: svc.Id, Service: &types.ServiceChange{
		HealthCheckConfig: &types.HealthCheckConfig{Type: types.HealthCheckTypeHttp, ResourcePath: aws.String("/"), FailureThreshold: aws.Int32(2)}}})).get(t)
	if got := must(c.GetService(ctx, &sd.GetServiceInput{Id: svc.Id})).get(t).Service.HealthCheckConfig; got == nil || got.Type != types.HealthCheckTypeHttp || aws.ToInt32(got.FailureThreshold) != 2 {
		t.Fatalf("HealthCheckConfig after UpdateService: %+v", got)
	}
	// As the model says of UpdateService, a HealthCheckConfig the request
	// omits is deleted.
	must(c.UpdateService(ctx, &sd.UpdateServiceInput{Id: svc.Id, Service: &types.ServiceChange{Description: aws.String("d")}})).get(t)
	if got := must(c.GetService(ctx, &sd.GetServiceInput{Id: svc.Id})).get(t).Service.HealthCheckConfig; got != nil {
		t.Fatalf("HealthCheckConfig after an UpdateService without it: %+v", got)
	}

	privNS := namespaceID(t, c, must(c.CreatePrivateDnsNamespace(ctx, &sd.CreatePrivateDnsNamespaceInput{Name: aws.String("p.local"), Vpc: aws.String("vpc-1")})).get(t).OperationId)
	_, err := c.CreateService(ctx, &sd.CreateServiceInput{Name: aws.String("web"), NamespaceId: aws.String(privNS), HealthCheckConfig: hc,
		DnsConfig: &types.DnsConfig{DnsRecords: []types.DnsRecord{{Type: types.RecordTypeA, TTL: aws.Int64(60)}}}})
	isA[*types.InvalidInput](t, "HealthCheckConfig in a private DNS namespace", err)
}

// tagList is n tags named prefix0, prefix1, ….
func tagList(prefix string, n int) []types.Tag {
	var tags []types.Tag
	for i := range n {
		tags = append(tags, types.Tag{Key: aws.String(fmt.Sprint(prefix, i)), Value: aws.String("v")})
	}
	return tags
}

// A resource holds at most 50 tags (TooManyTagsException's
// documentation: "each resource can have a maximum of 50 tags"), at
// creation and through TagResource; tollgate took 200.
func TestFiftyTagsPerResource(t *testing.T) {
	n := newNode(t, limitertest.NewClock(), cloudmap.Options{})
	c := n.client("AKIDTAGS")
	ctx := context.Background()
	_, err := c.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{Name: aws.String("over"), Tags: tagList("t", 51)})
	isA[*types.TooManyTagsException](t, "51 tags at creation", err)
	nsID := namespaceID(t, c, must(c.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{Name: aws.String("full"), Tags: tagList("t", 50)})).get(t).OperationId)
	ns := must(c.GetNamespace(ctx, &sd.GetNamespaceInput{Id: aws.String(nsID)})).get(t).Namespace
	_, err = c.TagResource(ctx, &sd.TagResourceInput{ResourceARN: ns.Arn, Tags: tagList("u", 1)})
	isA[*types.TooManyTagsException](t, "a 51st tag", err)
	// A tag that replaces one's value adds none.
	must(c.TagResource(ctx, &sd.TagResourceInput{ResourceARN: ns.Arn, Tags: tagList("t", 50)})).get(t)
	_, err = c.CreateService(ctx, &sd.CreateServiceInput{Name: aws.String("web"), NamespaceId: aws.String(nsID), Tags: tagList("t", 51)})
	isA[*types.TooManyTagsException](t, "51 tags on a service", err)
}

// raw sends one Cloud Map request as access key key and returns the
// answer's JSON document.
func raw(t *testing.T, url, key, op, body string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", cloudmap.TargetPrefix+"."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+key+"/20260101/us-east-1/servicediscovery/aws4_request, SignedHeaders=host, Signature=00")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: %d %v %v", op, resp.StatusCode, doc, err)
	}
	return doc
}

// An HTTP namespace's Properties has "DnsProperties": {} beside its
// HttpProperties, as in the model's GetNamespace and ListNamespaces
// examples (the SDK cannot tell an empty one from none, so this reads the
// wire).
func TestHTTPNamespaceHasEmptyDnsProperties(t *testing.T) {
	n := newNode(t, limitertest.NewClock(), cloudmap.Options{})
	op := raw(t, n.srv.URL, "AKIDWIRE", "CreateHttpNamespace", `{"Name":"example-http.com"}`)["OperationId"].(string)
	got := raw(t, n.srv.URL, "AKIDWIRE", "GetOperation", `{"OperationId":"`+op+`"}`)
	id := got["Operation"].(map[string]any)["Targets"].(map[string]any)["NAMESPACE"].(string)
	want := `{"DnsProperties":{},"HttpProperties":{"HttpName":"example-http.com"}}`
	ns := raw(t, n.srv.URL, "AKIDWIRE", "GetNamespace", `{"Id":"`+id+`"}`)["Namespace"].(map[string]any)
	if b, _ := json.Marshal(ns["Properties"]); string(b) != want {
		t.Errorf("GetNamespace's Properties: %s, want %s", b, want)
	}
	list := raw(t, n.srv.URL, "AKIDWIRE", "ListNamespaces", `{}`)["Namespaces"].([]any)
	if b, _ := json.Marshal(list[0].(map[string]any)["Properties"]); string(b) != want {
		t.Errorf("ListNamespaces' Properties: %s, want %s", b, want)
	}
}

// An OperationId is 32 lowercase letters and digits, '-', and its
// creation time in Unix milliseconds, base 36, as every AWS example is
// ("gv4g5meo7ndmeh4fqskygvk23d2fijwa-k9302yzd", created at
// 1587055860.121): from each operation that returns one, the Go API's
// too (ListOperations).
func TestOperationIdsHaveAWSForm(t *testing.T) {
	// The registry's clock is at the example's time (the gateway's is
	// its own).
	clock := limitertest.NewClock()
	clock.Advance(time.UnixMilli(1587055860121).Sub(clock.Now()))
	n := newNode(t, limitertest.NewClock(), cloudmap.Options{Now: clock.Now})
	c := n.client("AKIDOPID")
	ctx := context.Background()
	form := regexp.MustCompile(`^[a-z0-9]{32}-[a-z0-9]{8}$`)
	check := func(what string, id *string) {
		t.Helper()
		op := must(c.GetOperation(ctx, &sd.GetOperationInput{OperationId: id})).get(t).Operation
		_, suffix, _ := strings.Cut(aws.ToString(id), "-")
		ms, err := strconv.ParseInt(suffix, 36, 64)
		if !form.MatchString(aws.ToString(id)) || err != nil || ms != op.CreateDate.UnixMilli() {
			t.Errorf("%s: OperationId %q, created at %d ms", what, aws.ToString(id), op.CreateDate.UnixMilli())
		}
	}
	nsOp := must(c.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{Name: aws.String("local")})).get(t).OperationId
	if _, got, _ := strings.Cut(aws.ToString(nsOp), "-"); got != "k9302yzd" {
		t.Errorf("the OperationId of an operation created at 1587055860.121 ends %q, want AWS's k9302yzd", got)
	}
	check("CreateHttpNamespace", nsOp)
	nsID := namespaceID(t, c, nsOp)
	clock.Advance(time.Second)
	check("UpdateHttpNamespace", must(c.UpdateHttpNamespace(ctx, &sd.UpdateHttpNamespaceInput{Id: aws.String(nsID),
		Namespace: &types.HttpNamespaceChange{Description: aws.String("d")}})).get(t).OperationId)
	svcID := must(c.CreateService(ctx, &sd.CreateServiceInput{Name: aws.String("web"), NamespaceId: aws.String(nsID)})).get(t).Service.Id
	check("UpdateService", must(c.UpdateService(ctx, &sd.UpdateServiceInput{Id: svcID, Service: &types.ServiceChange{Description: aws.String("d")}})).get(t).OperationId)
	check("RegisterInstance", must(c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: svcID, InstanceId: aws.String("i-1"),
		Attributes: map[string]string{"k": "v"}})).get(t).OperationId)
	check("DeregisterInstance", must(c.DeregisterInstance(ctx, &sd.DeregisterInstanceInput{ServiceId: svcID, InstanceId: aws.String("i-1")})).get(t).OperationId)
	sc := cloudmap.Scope{Account: "AKIDOPID", Region: "us-east-1"}
	if err := n.reg.RegisterInstance(ctx, sc, "local", "web", "i-2", nil); err != nil {
		t.Fatal(err)
	}
	if err := n.reg.DeregisterInstance(ctx, sc, "local", "web", "i-2"); err != nil {
		t.Fatal(err)
	}
	must(c.DeleteService(ctx, &sd.DeleteServiceInput{Id: svcID})).get(t)
	check("DeleteNamespace", must(c.DeleteNamespace(ctx, &sd.DeleteNamespaceInput{Id: aws.String(nsID)})).get(t).OperationId)
	all := must(c.ListOperations(ctx, &sd.ListOperationsInput{})).get(t).Operations
	if len(all) != 8 {
		t.Errorf("ListOperations: %d operations, want 8", len(all))
	}
	for _, op := range all {
		check("ListOperations", op.Id)
	}
}

// RegisterInstance's Attributes is required, but the model's map has no
// minimum length (and moto registers such instances): Attributes {}
// registers an instance of an HTTP service, which DiscoverInstances finds;
// no Attributes at all is InvalidInput.
func TestRegisterInstanceWithEmptyAttributes(t *testing.T) {
	n := newNode(t, limitertest.NewClock(), cloudmap.Options{})
	c := n.client("AKIDEMPTY")
	ctx := context.Background()
	_, svcID := setup(t, c)
	must(c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: aws.String(svcID), InstanceId: aws.String("i-1"),
		Attributes: map[string]string{}})).get(t)
	if ids, _ := discovered(t, c, &sd.DiscoverInstancesInput{NamespaceName: aws.String("local"), ServiceName: aws.String("web")}); !slices.Equal(ids, []string{"i-1"}) {
		t.Fatalf("discovered %v, want i-1", ids)
	}
	if code, typ := call(t, n.srv.URL, "AKIDEMPTY", "", "RegisterInstance", `{"ServiceId":"`+svcID+`","InstanceId":"i-2"}`); code != 400 || typ != "InvalidInput" {
		t.Fatalf("RegisterInstance without Attributes: %d %s, want 400 InvalidInput", code, typ)
	}
}
