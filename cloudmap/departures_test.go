package cloudmap_test

import (
	"context"
	"fmt"
	"testing"

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
