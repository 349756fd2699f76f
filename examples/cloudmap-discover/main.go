// Command cloudmap-discover calls AWS Cloud Map's DiscoverInstances through
// a tollgate server with the AWS SDK for Go v2.
//
// The SDK sends DiscoverInstances to the endpoint's host with "data-" in
// front (data-servicediscovery.us-east-1.amazonaws.com). With an endpoint
// such as http://127.0.0.1:8080 that host is data-127.0.0.1, which does not
// resolve, so this client turns the prefix off for its operations. The AWS
// CLI's switch for the same is AWS_DISABLE_HOST_PREFIX_INJECTION=true.
//
//	go install ./cmd/tollgate # once: puts tollgate on your PATH
//	tollgate serve &
//	go run ./examples/cloudmap-discover
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
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

// run calls DiscoverInstances once; optFns adjust the client.
func run(ctx context.Context, endpoint string, out io.Writer, optFns ...func(*sd.Options)) error {
	client := sd.New(sd.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		APIOptions:   []func(*middleware.Stack) error{disableHostPrefix},
	}, optFns...)
	res, err := client.DiscoverInstances(ctx, &sd.DiscoverInstancesInput{
		NamespaceName: aws.String("example.local"),
		ServiceName:   aws.String("web"),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "DiscoverInstances: %d instance(s)\n", len(res.Instances))
	return nil
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
