// Command cloudmap-discover registers an instance in tollgate's local AWS
// Cloud Map registry and discovers it, with the AWS SDK for Go v2.
//
// The SDK sends DiscoverInstances to the endpoint's host with "data-" in
// front (data-servicediscovery.us-east-1.amazonaws.com). With an endpoint
// such as http://127.0.0.1:8080 that host is data-127.0.0.1, which does not
// resolve, so this client turns the prefix off for its operations. The AWS
// CLI's switch for the same is AWS_DISABLE_HOST_PREFIX_INJECTION=true.
//
//	go install -tags grpcnotrace ./cmd/tollgate # once: puts tollgate on your PATH
//	tollgate serve &
//	go run ./examples/cloudmap-discover
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
	"github.com/aws/aws-sdk-go-v2/service/servicediscovery/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func main() {
	endpoint := flag.String("endpoint", "http://127.0.0.1:8080", "tollgate server")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, *endpoint, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run registers instance web-1 of service web in namespace example.local,
// creating them when missing, then discovers it; optFns adjust the client.
func run(ctx context.Context, endpoint string, out io.Writer, optFns ...func(*sd.Options)) error {
	client := sd.New(sd.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		APIOptions:   []func(*middleware.Stack) error{disableHostPrefix},
	}, optFns...)
	nsID, err := namespaceID(ctx, client, "example.local")
	if err != nil {
		return err
	}
	svc, err := client.CreateService(ctx, &sd.CreateServiceInput{Name: aws.String("web"), NamespaceId: aws.String(nsID)})
	var exists *types.ServiceAlreadyExists
	svcID := ""
	switch {
	case errors.As(err, &exists):
		svcID = aws.ToString(exists.ServiceId)
	case err != nil:
		return err
	default:
		svcID = aws.ToString(svc.Service.Id)
	}
	_, err = client.RegisterInstance(ctx, &sd.RegisterInstanceInput{
		ServiceId:  aws.String(svcID),
		InstanceId: aws.String("web-1"),
		Attributes: map[string]string{"AWS_INSTANCE_IPV4": "127.0.0.1", "AWS_INSTANCE_PORT": "8081"},
	})
	if err != nil {
		return err
	}
	res, err := client.DiscoverInstances(ctx, &sd.DiscoverInstancesInput{
		NamespaceName: aws.String("example.local"),
		ServiceName:   aws.String("web"),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "DiscoverInstances: %d instance(s)\n", len(res.Instances))
	for _, in := range res.Instances {
		fmt.Fprintf(out, "  %s at %s:%s\n", aws.ToString(in.InstanceId),
			in.Attributes["AWS_INSTANCE_IPV4"], in.Attributes["AWS_INSTANCE_PORT"])
	}
	return nil
}

// namespaceID creates an HTTP namespace, or finds the one of that name.
func namespaceID(ctx context.Context, client *sd.Client, name string) (string, error) {
	op, err := client.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{Name: aws.String(name)})
	var exists *types.NamespaceAlreadyExists
	if errors.As(err, &exists) {
		return aws.ToString(exists.NamespaceId), nil
	}
	if err != nil {
		return "", err
	}
	got, err := client.GetOperation(ctx, &sd.GetOperationInput{OperationId: op.OperationId})
	if err != nil {
		return "", err
	}
	return got.Operation.Targets[string(types.OperationTargetTypeNamespace)], nil
}

// disableHostPrefix keeps the SDK from putting "data-" in front of the
// endpoint's host.
func disableHostPrefix(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("DisableHostPrefix",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (
			middleware.InitializeOutput, middleware.Metadata, error,
		) {
			return next.HandleInitialize(smithyhttp.DisableEndpointHostPrefix(ctx, true), in)
		}), middleware.Before)
}
