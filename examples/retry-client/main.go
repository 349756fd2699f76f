// Command retry-client retries a tollgate server's throttles with package
// retry in its three forms: retry.Transport under any *http.Client,
// retry.Do around any call, and awsretry as the AWS SDK's retryer. Each
// part drains a bucket and keeps calling; the throttled calls wait (1+r,
// 2+r, 4+r … s, at least the server's Retry-After, at most 32 s) and
// succeed once the bucket has refilled.
//
//	go install -tags grpcnotrace ./cmd/tollgate # once: puts tollgate on your PATH
//	tollgate serve &
//	go run ./examples/retry-client
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/smithy-go"

	"github.com/tollgate/tollgate/retry"
	"github.com/tollgate/tollgate/retry/awsretry"
)

func main() {
	endpoint := flag.String("endpoint", "http://127.0.0.1:8080", "tollgate server")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := run(ctx, *endpoint, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run makes the calls; opts are added to every policy.
func run(ctx context.Context, endpoint string, out io.Writer, opts ...retry.Option) error {
	logged := func(o ...retry.Option) []retry.Option {
		hook := retry.OnRetry(func(attempt int, wait time.Duration, err error) {
			var apiErr smithy.APIError // the SDK's errors are long: keep the code
			if errors.As(err, &apiErr) {
				err = errors.New(apiErr.ErrorCode())
			}
			fmt.Fprintf(out, "  attempt %d: %v; next in %v\n", attempt, err, wait.Round(time.Millisecond))
		})
		return append(append([]retry.Option{hook}, o...), opts...)
	}

	// 1. retry.Transport: the native API. A take is a POST, and a throttled
	// take took nothing, so it is marked as safe to send again.
	client := &http.Client{Transport: &retry.Transport{Policy: retry.New(logged()...)}}
	for _, tokens := range []int{50, 1} {
		body := fmt.Sprintf(`{"service":"ecs","account":"111122223333","region":"us-east-1",`+
			`"action":"DescribeClusters","tokens":%d}`, tokens)
		req, err := http.NewRequestWithContext(retry.MarkRetryable(ctx), http.MethodPost,
			endpoint+"/v1/take", strings.NewReader(body))
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		fmt.Fprintf(out, "take %d: %s\n", tokens, resp.Status)
	}

	// 2. retry.Do around an SDK call that does not retry by itself, with a
	// 64 s maximum_backoff and a client-side retry budget.
	plain := ecsClient(endpoint, "AKIDRETRYDO", aws.NopRetryer{})
	policy := retry.New(logged(retry.WithMaxBackoff(64*time.Second), retry.WithBudget(retry.DefaultTokenBudget()))...)
	for range 60 {
		if err := policy.Do(ctx, func(ctx context.Context) error {
			_, err := plain.DescribeClusters(ctx, &ecs.DescribeClustersInput{})
			return err
		}); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "retry.Do: 60 DescribeClusters calls succeeded")

	// 3. awsretry: the same policy as the SDK's own retryer.
	sdk := ecsClient(endpoint, "AKIDAWSRETRY", awsretry.New(logged()...))
	for range 60 {
		if _, err := sdk.DescribeClusters(ctx, &ecs.DescribeClustersInput{}); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "awsretry: 60 DescribeClusters calls succeeded")
	return nil
}

// ecsClient returns an ECS client for endpoint; the access key id is the
// account tollgate throttles.
func ecsClient(endpoint, accessKey string, retryer aws.Retryer) *ecs.Client {
	return ecs.New(ecs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, "secret", ""),
		Retryer:      retryer,
	})
}
