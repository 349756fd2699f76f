package cloudmap_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
	"github.com/aws/aws-sdk-go-v2/service/servicediscovery/types"

	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/limiter/limitertest"
)

// modelOperations are the 30 operations of botocore's
// servicediscovery/2017-03-14/service-2.json (the same as aws-sdk-go-v2
// service/servicediscovery v1.40.2's api_op_*.go).
var modelOperations = []string{
	"CreateHttpNamespace", "CreatePrivateDnsNamespace", "CreatePublicDnsNamespace", "CreateService",
	"DeleteNamespace", "DeleteService", "DeleteServiceAttributes", "DeregisterInstance",
	"DiscoverInstances", "DiscoverInstancesRevision", "GetInstance", "GetInstancesHealthStatus",
	"GetNamespace", "GetOperation", "GetService", "GetServiceAttributes", "ListInstances",
	"ListNamespaces", "ListOperations", "ListServices", "ListTagsForResource", "RegisterInstance",
	"TagResource", "UntagResource", "UpdateHttpNamespace", "UpdateInstanceCustomHealthStatus",
	"UpdatePrivateDnsNamespace", "UpdatePublicDnsNamespace", "UpdateService", "UpdateServiceAttributes",
}

// Every operation of the model is answered through the gateway's
// cloudmap preset (by the registry's handler, so an empty request gets
// InvalidInput or a result, never UnknownOperationException), and the
// registry answers no operation the model lacks.
func TestEveryModelOperationIsAnswered(t *testing.T) {
	if len(modelOperations) != 30 {
		t.Fatalf("the model has 30 operations, the list %d", len(modelOperations))
	}
	n := newNode(t, limitertest.NewClock(), cloudmap.Options{})
	for _, op := range modelOperations {
		if code, typ := call(t, n.srv.URL, "AKIDOPS", "", op, `{}`); typ == "UnknownOperationException" || code >= 500 {
			t.Errorf("%s: %d %s", op, code, typ)
		}
	}
	if got := cloudmap.Operations(); !slices.Equal(got, slices.Sorted(slices.Values(modelOperations))) {
		t.Errorf("Operations() = %v, want the model's", got)
	}
}

var accountID = regexp.MustCompile(`^[0-9]{12}$`)

// The operations the registry lacked, through the SDK: public DNS
// namespaces, namespace and service updates, service attributes, tags,
// ListOperations; and every account field a 12-digit id for an access key
// nobody mapped.
func TestSDKUpdatesTagsAttributesOperations(t *testing.T) {
	n := newNode(t, limitertest.NewClock(), cloudmap.Options{})
	c := n.client("AKIDEXAMPLE")
	ctx := context.Background()
	nsID, svcID := setup(t, c)

	// Public DNS namespace, stored with its SOA.
	op := must(c.CreatePublicDnsNamespace(ctx, &sd.CreatePublicDnsNamespaceInput{Name: aws.String("example.com"),
		Properties: &types.PublicDnsNamespaceProperties{DnsProperties: &types.PublicDnsPropertiesMutable{SOA: &types.SOA{TTL: aws.Int64(60)}}},
		Tags:       []types.Tag{{Key: aws.String("team"), Value: aws.String("a")}}})).get(t)
	pubID := must(c.GetOperation(ctx, &sd.GetOperationInput{OperationId: op.OperationId})).get(t).Operation.Targets["NAMESPACE"]
	pub := must(c.GetNamespace(ctx, &sd.GetNamespaceInput{Id: aws.String(pubID)})).get(t).Namespace
	if pub.Type != types.NamespaceTypeDnsPublic || aws.ToInt64(pub.Properties.DnsProperties.SOA.TTL) != 60 || !accountID.MatchString(aws.ToString(pub.ResourceOwner)) {
		t.Fatalf("public namespace: %+v", pub)
	}
	_, err := c.CreatePublicDnsNamespace(ctx, &sd.CreatePublicDnsNamespaceInput{Name: aws.String("nodots")})
	isA[*types.InvalidInput](t, "a public name of one label", err)

	// Namespace updates, each of its own type.
	uop := must(c.UpdateHttpNamespace(ctx, &sd.UpdateHttpNamespaceInput{Id: aws.String(nsID), UpdaterRequestId: aws.String("u1"),
		Namespace: &types.HttpNamespaceChange{Description: aws.String("the local one")}})).get(t)
	again := must(c.UpdateHttpNamespace(ctx, &sd.UpdateHttpNamespaceInput{Id: aws.String(nsID), UpdaterRequestId: aws.String("u1"),
		Namespace: &types.HttpNamespaceChange{Description: aws.String("the local one")}})).get(t)
	if aws.ToString(uop.OperationId) != aws.ToString(again.OperationId) {
		t.Errorf("a repeated UpdaterRequestId gave another operation")
	}
	if d := must(c.GetNamespace(ctx, &sd.GetNamespaceInput{Id: aws.String(nsID)})).get(t).Namespace.Description; aws.ToString(d) != "the local one" {
		t.Errorf("description after UpdateHttpNamespace: %q", aws.ToString(d))
	}
	must(c.UpdatePublicDnsNamespace(ctx, &sd.UpdatePublicDnsNamespaceInput{Id: aws.String(pubID),
		Namespace: &types.PublicDnsNamespaceChange{Properties: &types.PublicDnsNamespacePropertiesChange{
			DnsProperties: &types.PublicDnsPropertiesMutableChange{SOA: &types.SOAChange{TTL: aws.Int64(300)}}}}})).get(t)
	if ttl := must(c.GetNamespace(ctx, &sd.GetNamespaceInput{Id: aws.String(pubID)})).get(t).Namespace.Properties.DnsProperties.SOA.TTL; aws.ToInt64(ttl) != 300 {
		t.Errorf("SOA TTL after UpdatePublicDnsNamespace: %d", aws.ToInt64(ttl))
	}
	_, err = c.UpdatePrivateDnsNamespace(ctx, &sd.UpdatePrivateDnsNamespaceInput{Id: aws.String(nsID),
		Namespace: &types.PrivateDnsNamespaceChange{Description: aws.String("x")}})
	isA[*types.InvalidInput](t, "UpdatePrivateDnsNamespace of an HTTP namespace", err)
	_, err = c.UpdateHttpNamespace(ctx, &sd.UpdateHttpNamespaceInput{Id: aws.String("ns-none"), Namespace: &types.HttpNamespaceChange{Description: aws.String("x")}})
	isA[*types.NamespaceNotFound](t, "UpdateHttpNamespace of no namespace", err)

	// UpdateService, by ARN.
	svc := must(c.GetService(ctx, &sd.GetServiceInput{Id: aws.String(svcID)})).get(t).Service
	must(c.UpdateService(ctx, &sd.UpdateServiceInput{Id: svc.Arn, Service: &types.ServiceChange{Description: aws.String("web tier")}})).get(t)
	if d := must(c.GetService(ctx, &sd.GetServiceInput{Id: aws.String(svcID)})).get(t).Service.Description; aws.ToString(d) != "web tier" {
		t.Errorf("description after UpdateService: %q", aws.ToString(d))
	}
	for _, f := range []string{aws.ToString(svc.ResourceOwner), aws.ToString(svc.CreatedByAccount)} {
		if !accountID.MatchString(f) {
			t.Errorf("service account field %q is not a 12-digit account id", f)
		}
	}

	// Service attributes.
	must(c.UpdateServiceAttributes(ctx, &sd.UpdateServiceAttributesInput{ServiceId: aws.String(svcID), Attributes: map[string]string{"a": "1", "b": "2"}})).get(t)
	must(c.DeleteServiceAttributes(ctx, &sd.DeleteServiceAttributesInput{ServiceId: aws.String(svcID), Attributes: []string{"a"}})).get(t)
	sa := must(c.GetServiceAttributes(ctx, &sd.GetServiceAttributesInput{ServiceId: aws.String(svcID)})).get(t).ServiceAttributes
	if len(sa.Attributes) != 1 || sa.Attributes["b"] != "2" || aws.ToString(sa.ServiceArn) != aws.ToString(svc.Arn) {
		t.Errorf("service attributes: %+v", sa)
	}
	many := map[string]string{}
	for i := range 30 {
		many[fmt.Sprint("k", i)] = "v"
	}
	_, err = c.UpdateServiceAttributes(ctx, &sd.UpdateServiceAttributesInput{ServiceId: aws.String(svcID), Attributes: many})
	isA[*types.ServiceAttributesLimitExceededException](t, "31 service attributes", err)
	_, err = c.GetServiceAttributes(ctx, &sd.GetServiceAttributesInput{ServiceId: aws.String("srv-none")})
	isA[*types.ServiceNotFound](t, "attributes of no service", err)

	// Tags: given at creation, read back, added, removed; at most 50.
	tags := func(resARN *string) []string {
		var kv []string
		for _, tg := range must(c.ListTagsForResource(ctx, &sd.ListTagsForResourceInput{ResourceARN: resARN})).get(t).Tags {
			kv = append(kv, aws.ToString(tg.Key)+"="+aws.ToString(tg.Value))
		}
		return kv
	}
	if got := tags(pub.Arn); !slices.Equal(got, []string{"team=a"}) {
		t.Errorf("tags given at creation: %v", got)
	}
	must(c.TagResource(ctx, &sd.TagResourceInput{ResourceARN: svc.Arn, Tags: []types.Tag{{Key: aws.String("x"), Value: aws.String("1")}, {Key: aws.String("y"), Value: aws.String("")}}})).get(t)
	must(c.UntagResource(ctx, &sd.UntagResourceInput{ResourceARN: svc.Arn, TagKeys: []string{"x"}})).get(t)
	if got := tags(svc.Arn); !slices.Equal(got, []string{"y="}) {
		t.Errorf("service tags: %v", got)
	}
	var tooMany []types.Tag
	for i := range 200 {
		tooMany = append(tooMany, types.Tag{Key: aws.String(fmt.Sprint("t", i)), Value: aws.String("v")})
	}
	_, err = c.TagResource(ctx, &sd.TagResourceInput{ResourceARN: svc.Arn, Tags: tooMany})
	isA[*types.TooManyTagsException](t, "200 tags beside one", err)
	_, err = c.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{Name: aws.String("tagged"), Tags: append(tooMany, types.Tag{Key: aws.String("one"), Value: aws.String("more")})})
	isA[*types.TooManyTagsException](t, "201 tags at creation", err)
	_, err = c.ListTagsForResource(ctx, &sd.ListTagsForResourceInput{ResourceARN: aws.String(strings.Replace(aws.ToString(svc.Arn), svcID, "srv-none", 1))})
	isA[*types.ResourceNotFoundException](t, "tags of no service", err)

	// ListOperations, filtered.
	ops := must(c.ListOperations(ctx, &sd.ListOperationsInput{Filters: []types.OperationFilter{
		{Name: types.OperationFilterNameType, Condition: types.FilterConditionEq, Values: []string{"UPDATE_NAMESPACE"}}}})).get(t).Operations
	if len(ops) != 2 || aws.ToString(ops[0].Id) != aws.ToString(uop.OperationId) || ops[0].Status != types.OperationStatusSuccess {
		t.Errorf("UPDATE_NAMESPACE operations: %+v", ops)
	}
	all := must(c.ListOperations(ctx, &sd.ListOperationsInput{})).get(t).Operations
	if len(all) != 5 { // 2 namespaces created, 2 updated, 1 service updated
		t.Errorf("ListOperations: %d operations", len(all))
	}
	got := must(c.GetOperation(ctx, &sd.GetOperationInput{OperationId: all[0].Id})).get(t).Operation
	if !accountID.MatchString(aws.ToString(got.OwnerAccount)) {
		t.Errorf("OwnerAccount %q is not a 12-digit account id", aws.ToString(got.OwnerAccount))
	}
	// The account fields are one 12-digit id, which OwnerAccount accepts.
	if _, err := c.DiscoverInstancesRevision(ctx, &sd.DiscoverInstancesRevisionInput{NamespaceName: aws.String("local"), ServiceName: aws.String("web"),
		OwnerAccount: got.OwnerAccount}); err != nil {
		t.Errorf("DiscoverInstancesRevision with OwnerAccount %s: %v", aws.ToString(got.OwnerAccount), err)
	}
	// ListServices takes a namespace ARN in its NAMESPACE_ID filter.
	nsARN := must(c.GetNamespace(ctx, &sd.GetNamespaceInput{Id: aws.String(nsID)})).get(t).Namespace.Arn
	svcs := must(c.ListServices(ctx, &sd.ListServicesInput{Filters: []types.ServiceFilter{{Name: types.ServiceFilterNameNamespaceId, Values: []string{aws.ToString(nsARN)}}}})).get(t).Services
	if len(svcs) != 1 || aws.ToString(svcs[0].Id) != svcID {
		t.Errorf("ListServices by namespace ARN: %+v", svcs)
	}
}

// RegisterInstance: AWS_INIT_HEALTH_STATUS sets the first health (UNHEALTHY
// is discovered so, MAYBE is refused), an empty attribute value is
// accepted as the model's pattern allows, and a CreatorRequestId used for
// another instance is DuplicateRequest (the same one again is a retry).
func TestSDKRegisterInstanceAttributes(t *testing.T) {
	n := newNode(t, limitertest.NewClock(), cloudmap.Options{})
	c := n.client("AKIDREG")
	ctx := context.Background()
	_, svcID := setup(t, c)
	reg := func(id, req string, attrs map[string]string) error {
		in := &sd.RegisterInstanceInput{ServiceId: aws.String(svcID), InstanceId: aws.String(id), Attributes: attrs}
		if req != "" {
			in.CreatorRequestId = aws.String(req)
		}
		_, err := c.RegisterInstance(ctx, in)
		return err
	}
	if err := reg("sick", "", map[string]string{"AWS_INIT_HEALTH_STATUS": "UNHEALTHY", "note": ""}); err != nil {
		t.Fatal(err)
	}
	if err := reg("well", "r-1", map[string]string{"AWS_INIT_HEALTH_STATUS": "HEALTHY"}); err != nil {
		t.Fatal(err)
	}
	isA[*types.InvalidInput](t, "AWS_INIT_HEALTH_STATUS=MAYBE", reg("maybe", "", map[string]string{"AWS_INIT_HEALTH_STATUS": "MAYBE"}))
	isA[*types.DuplicateRequest](t, "a CreatorRequestId used for another instance", reg("other", "r-1", map[string]string{"k": "v"}))
	if err := reg("well", "r-1", map[string]string{"AWS_INIT_HEALTH_STATUS": "HEALTHY"}); err != nil {
		t.Fatalf("a retry with the same CreatorRequestId: %v", err)
	}
	hs := must(c.GetInstancesHealthStatus(ctx, &sd.GetInstancesHealthStatusInput{ServiceId: aws.String(svcID)})).get(t).Status
	if hs["sick"] != types.HealthStatusUnhealthy || hs["well"] != types.HealthStatusHealthy || len(hs) != 2 {
		t.Fatalf("health: %v", hs)
	}
	out := must(c.DiscoverInstances(ctx, &sd.DiscoverInstancesInput{NamespaceName: aws.String("local"), ServiceName: aws.String("web"),
		HealthStatus: types.HealthStatusFilterUnhealthy})).get(t)
	if len(out.Instances) != 1 || aws.ToString(out.Instances[0].InstanceId) != "sick" || out.Instances[0].Attributes["note"] != "" {
		t.Fatalf("unhealthy instances: %+v", out.Instances)
	}
}

// DiscoverInstances answers in random order drawn from Options.Rand: the
// same seed gives the same orders, and with MaxResults below the count the
// first instance varies between calls (it was always the smallest id).
func TestDiscoverInstancesRandomOrder(t *testing.T) {
	orders := func(seed uint64) []string {
		r, err := cloudmap.New(cloudmap.Options{Rand: rand.NewChaCha8([32]byte{byte(seed)})})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if err := r.RegisterInstance(context.Background(), cloudmap.DefaultScope, "local", "web", fmt.Sprint("b", i), nil); err != nil {
				t.Fatal(err)
			}
		}
		var firsts []string
		for range 10 {
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"NamespaceName":"local","ServiceName":"web","MaxResults":3}`))
			req.Header.Set("X-Amz-Target", cloudmap.TargetPrefix+".DiscoverInstances")
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			i := bytes.Index(w.Body.Bytes(), []byte(`"InstanceId":"`))
			if w.Code != 200 || i < 0 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			firsts = append(firsts, strings.SplitN(w.Body.String()[i+14:], `"`, 2)[0])
		}
		return firsts
	}
	a, b := orders(1), orders(1)
	if !slices.Equal(a, b) {
		t.Errorf("the same seed gave %v and %v", a, b)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(a)))) < 3 {
		t.Errorf("10 calls began with only %v", a)
	}
}
