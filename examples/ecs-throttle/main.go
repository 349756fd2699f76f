// Command ecs-throttle points the AWS SDK for Go v2 ECS client at a tollgate
// server and calls DescribeClusters until it is throttled: the first 50
// calls pass (the "cluster read" bucket holds 50 tokens and refills 20 per
// second), then the SDK reports ThrottlingException, as ECS would.
//
//	go install -tags grpcnotrace ./cmd/tollgate # once: puts tollgate on your PATH
//	tollgate serve &
//	go run ./examples/ecs-throttle
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
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/smithy-go"
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

func run(ctx context.Context, endpoint string, out io.Writer) error {
	client := ecs.New(ecs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		Retryer:      aws.NopRetryer{}, // see the throttles instead of retrying them
	})
	for call := 1; call <= 100; call++ {
		_, err := client.DescribeClusters(ctx, &ecs.DescribeClustersInput{})
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) {
			fmt.Fprintf(out, "call %d: %s (%s)\n", call, apiErr.ErrorCode(), apiErr.ErrorMessage())
			return nil
		}
		if err != nil {
			return err
		}
	}
	return errors.New("100 calls and no throttle: is the endpoint a tollgate server?")
}
