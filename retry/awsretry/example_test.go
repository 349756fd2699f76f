package awsretry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecs"

	"github.com/tollgate/tollgate/retry"
	"github.com/tollgate/tollgate/retry/awsretry"
)

// An ECS client retries a throttled ListClusters under the default policy's
// rules. The local server throttles the first two requests the way ECS
// does. The example waits 1 ms between attempts to run fast; without
// WithSchedule the waits are 1+r, 2+r, 4+r … seconds.
func Example() {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if hits.Add(1) <= 2 {
			w.Header().Set("X-Amzn-ErrorType", "ThrottlingException")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"__type":"ThrottlingException","message":"Rate exceeded"}`)
			return
		}
		io.WriteString(w, `{"clusterArns":["arn:aws:ecs:us-east-1:123456789012:cluster/default"]}`)
	}))
	defer srv.Close()

	r := awsretry.New(
		retry.WithSchedule(retry.Constant(time.Millisecond)),
		retry.WithBudget(retry.DefaultTokenBudget()),
		retry.OnRetry(func(attempt int, delay time.Duration, err error) {
			fmt.Printf("attempt %d throttled, retrying in %v\n", attempt, delay)
		}),
	)
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
	}
	r.Apply(&cfg)
	client := ecs.NewFromConfig(cfg, func(o *ecs.Options) { o.BaseEndpoint = aws.String(srv.URL) })

	out, err := client.ListClusters(context.Background(), &ecs.ListClustersInput{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.ClusterArns, "after", hits.Load(), "requests")
	// Output:
	// attempt 1 throttled, retrying in 1ms
	// attempt 2 throttled, retrying in 1ms
	// [arn:aws:ecs:us-east-1:123456789012:cluster/default] after 3 requests
}
