package main

import (
	"context"
	"slices"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/tollgate/tollgate/internal/redistest"
)

// sdClient is a Cloud Map client of a tollgate server, the host prefix off.
func sdClient(addr, accessKey string) *sd.Client {
	return sd.New(sd.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://" + addr),
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, "secret", ""),
		Retryer:      aws.NopRetryer{},
		APIOptions: []func(*middleware.Stack) error{func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("DisableHostPrefix",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					return next.HandleInitialize(smithyhttp.DisableEndpointHostPrefix(ctx, true), in)
				}), middleware.Before)
		}},
	})
}

// registerOne creates namespace local, service web and instance web-1.
func registerOne(t *testing.T, c *sd.Client) {
	t.Helper()
	ctx := context.Background()
	op, err := c.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{Name: aws.String("local")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetOperation(ctx, &sd.GetOperationInput{OperationId: op.OperationId})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := c.CreateService(ctx, &sd.CreateServiceInput{Name: aws.String("web"), NamespaceId: aws.String(got.Operation.Targets["NAMESPACE"])})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: svc.Service.Id, InstanceId: aws.String("web-1"),
		Attributes: map[string]string{"AWS_INSTANCE_IPV4": "127.0.0.1", "AWS_INSTANCE_PORT": "8081"}}); err != nil {
		t.Fatal(err)
	}
}

func discoverIDs(t *testing.T, c *sd.Client) []string {
	t.Helper()
	out, err := c.DiscoverInstances(context.Background(), &sd.DiscoverInstancesInput{NamespaceName: aws.String("local"), ServiceName: aws.String("web")})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range out.Instances {
		ids = append(ids, aws.ToString(i.InstanceId))
	}
	return ids
}

// `tollgate serve` answers Cloud Map from its registry, and a SIGHUP reload
// loses no registration.
func TestServeCloudMapRegistrySurvivesSIGHUP(t *testing.T) {
	s := startServer(t)
	c := sdClient(s.addr, "AKIDSERVECM")
	registerOne(t, c)
	if ids := discoverIDs(t, c); !slices.Equal(ids, []string{"web-1"}) {
		t.Fatalf("discovered %v", ids)
	}
	s.cmd.Process.Signal(syscall.SIGHUP)
	s.waitLog(t, "config reloaded")
	if ids := discoverIDs(t, c); !slices.Equal(ids, []string{"web-1"}) {
		t.Fatalf("after SIGHUP discovered %v", ids)
	}
}

// Two `tollgate serve` nodes on one Redis answer one registry.
func TestTwoServeNodesShareOneCloudMap(t *testing.T) {
	rs := redistest.Start(t)
	a := startServer(t, "--store", rs.URL())
	b := startServer(t, "--store", rs.URL())
	registerOne(t, sdClient(a.addr, "AKIDSERVECM"))
	if ids := discoverIDs(t, sdClient(b.addr, "AKIDSERVECM")); !slices.Equal(ids, []string{"web-1"}) {
		t.Fatalf("node b discovered %v", ids)
	}
}
