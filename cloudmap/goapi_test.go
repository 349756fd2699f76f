package cloudmap_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
	"github.com/aws/smithy-go/middleware"

	"github.com/tollgate/tollgate/cloudmap"
)

// directClient is an SDK client of r itself, without a gateway: the
// registry alone speaks the protocol. Its access key is DefaultScope's
// account, so its requests land in DefaultScope.
func directClient(t *testing.T, r *cloudmap.Registry) *sd.Client {
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return sd.New(sd.Options{Region: cloudmap.DefaultScope.Region, BaseEndpoint: aws.String(srv.URL), Retryer: connectionRetryer(),
		Credentials: credentials.NewStaticCredentialsProvider(cloudmap.DefaultScope.Account, "s", ""),
		APIOptions:  []func(*middleware.Stack) error{disableHostPrefix}})
}

func TestGoAPIErrorsWrapSentinels(t *testing.T) {
	r, err := cloudmap.New(cloudmap.Options{Limits: cloudmap.Limits{InstancesPerService: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sc := cloudmap.DefaultScope
	if err := r.RegisterInstance(ctx, sc, "ns", "svc", "a", map[string]string{"AWS_INSTANCE_PORT": "99999"}); !errors.Is(err, cloudmap.ErrInvalidInput) {
		t.Fatalf("bad port: %v, want ErrInvalidInput", err)
	}
	if err := r.RegisterInstance(ctx, sc, "ns", "bad name!", "a", nil); !errors.Is(err, cloudmap.ErrInvalidInput) {
		t.Fatalf("bad service name: %v, want ErrInvalidInput", err)
	}
	if err := r.RegisterInstance(ctx, sc, "ns", "svc", "a", nil); err != nil {
		t.Fatal(err)
	}
	if err := r.RegisterInstance(ctx, sc, "ns", "svc", "b", nil); !errors.Is(err, cloudmap.ErrLimitExceeded) {
		t.Fatalf("second instance over a limit of 1: %v, want ErrLimitExceeded", err)
	}
	// Deregistering what is not there is not an error.
	for _, args := range [][3]string{{"ns", "svc", "zz"}, {"ns", "none", "a"}, {"none", "svc", "a"}} {
		if err := r.DeregisterInstance(ctx, sc, args[0], args[1], args[2]); err != nil {
			t.Fatalf("DeregisterInstance%v: %v", args, err)
		}
	}
	if _, err := cloudmap.New(cloudmap.Options{OperationDelay: -1}); err == nil {
		t.Fatal("a negative OperationDelay was accepted")
	}
}

func TestRegistrarFillsTheAddressAttributes(t *testing.T) {
	r, err := cloudmap.New(cloudmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	g := r.Registrar(cloudmap.DefaultScope, "local", "web", map[string]string{"stage": "test"})
	if err := g.Register(ctx, "web-1", "127.0.0.1:8081"); err != nil {
		t.Fatal(err)
	}
	if err := g.Register(ctx, "web-2", "[::1]:8082"); err != nil {
		t.Fatal(err)
	}
	if err := g.Register(ctx, "web-3", "localhost:80"); !errors.Is(err, cloudmap.ErrInvalidInput) {
		t.Fatalf("a host name: %v, want ErrInvalidInput", err)
	}
	c := directClient(t, r)
	out := must(c.DiscoverInstances(ctx, &sd.DiscoverInstancesInput{NamespaceName: aws.String("local"), ServiceName: aws.String("web")})).get(t)
	if len(out.Instances) != 2 {
		t.Fatalf("instances: %+v", out.Instances)
	}
	a, b := out.Instances[0].Attributes, out.Instances[1].Attributes
	if *out.Instances[0].InstanceId == "web-2" { // answers come in random order
		a, b = b, a
	}
	if a["AWS_INSTANCE_IPV4"] != "127.0.0.1" || a["AWS_INSTANCE_PORT"] != "8081" || a["stage"] != "test" ||
		b["AWS_INSTANCE_IPV6"] != "::1" || b["AWS_INSTANCE_PORT"] != "8082" {
		t.Fatalf("attributes %v and %v", a, b)
	}
	if err := g.Deregister(ctx, "web-1"); err != nil {
		t.Fatal(err)
	}
	if err := g.Deregister(ctx, "web-1"); err != nil {
		t.Fatalf("second Deregister: %v", err)
	}
}
