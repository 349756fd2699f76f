package crashtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
	sq "github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/tollgate/tollgate/servicequotas"
)

// ledger is what the server acknowledged, by writer of a round.
type ledger struct {
	mu       sync.Mutex
	services map[[2]int]string            // round, writer -> service id
	insts    map[[2]int]map[string]string // round, writer -> instance id -> its attribute "n"
	reqs     map[[2]int]map[string]ackReq // round, writer -> request id -> what was acknowledged
}

// ackReq is an acknowledged increase request: its value, and whether its
// approval was acknowledged too.
type ackReq struct {
	desired  float64
	approved bool
}

func (l *ledger) add(rw [2]int, f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.insts == nil {
		l.services, l.insts, l.reqs = map[[2]int]string{}, map[[2]int]map[string]string{}, map[[2]int]map[string]ackReq{}
	}
	if l.insts[rw] == nil {
		l.insts[rw], l.reqs[rw] = map[string]string{}, map[string]ackReq{}
	}
	f()
}

// clients call one server.
type clients struct {
	addr string
	http *http.Client
}

func newClients(addr string) *clients {
	return &clients{addr: addr, http: &http.Client{Timeout: 30 * time.Second, Transport: http.DefaultTransport.(*http.Transport).Clone()}}
}

func (c *clients) sd(key string) *sd.Client {
	return sd.New(sd.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + c.addr), HTTPClient: c.http,
		Credentials: credentials.NewStaticCredentialsProvider(key, "x", ""), Retryer: aws.NopRetryer{},
		APIOptions: []func(*middleware.Stack) error{func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("DisableHostPrefix",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					return next.HandleInitialize(smithyhttp.DisableEndpointHostPrefix(ctx, true), in)
				}), middleware.Before)
		}}})
}

func (c *clients) sq(key string) *sq.Client {
	return sq.New(sq.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + c.addr), HTTPClient: c.http,
		Credentials: credentials.NewStaticCredentialsProvider(key, "x", ""), Retryer: aws.NopRetryer{}})
}

// throttled tells a throttling answer, which the writers wait out.
func throttled(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && (strings.Contains(ae.ErrorCode(), "Throttl") || ae.ErrorCode() == "TooManyRequestsException")
}

// prepare creates each writer's namespace and service of the round,
// before the writers start (so before the kill).
func (c *clients) prepare(ctx context.Context, round, writers int, l *ledger) error {
	for w := range writers {
		cl := c.sd(accessKey(round, w))
		op, err := retryCall(ctx, func() (*sd.CreateHttpNamespaceOutput, error) {
			return cl.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{Name: aws.String("crash")})
		})
		if err != nil {
			return err
		}
		got, err := retryCall(ctx, func() (*sd.GetOperationOutput, error) {
			return cl.GetOperation(ctx, &sd.GetOperationInput{OperationId: op.OperationId})
		})
		if err != nil {
			return err
		}
		svc, err := retryCall(ctx, func() (*sd.CreateServiceOutput, error) {
			return cl.CreateService(ctx, &sd.CreateServiceInput{Name: aws.String("web"), NamespaceId: aws.String(got.Operation.Targets["NAMESPACE"])})
		})
		if err != nil {
			return err
		}
		l.add([2]int{round, w}, func() { l.services[[2]int{round, w}] = aws.ToString(svc.Service.Id) })
	}
	return nil
}

// write registers instances and requests and approves increases until
// ctx ends (the kill), noting each write acknowledged.
func (c *clients) write(ctx context.Context, round, w int, l *ledger) {
	rw := [2]int{round, w}
	key := accessKey(round, w)
	l.mu.Lock()
	svc := l.services[rw]
	l.mu.Unlock()
	if svc == "" {
		return
	}
	sdc, sqc := c.sd(key), c.sq(key)
	burst := servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst)
	pause := func() {
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	for i := 0; ctx.Err() == nil; i++ {
		id := fmt.Sprintf("i-%d", i)
		n := fmt.Sprintf("r%d-w%d-%d", round, w, i)
		_, err := sdc.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: aws.String(svc), InstanceId: aws.String(id),
			Attributes: map[string]string{"AWS_INSTANCE_IPV4": "10.0.0.1", "n": n}})
		switch {
		case err == nil:
			l.add(rw, func() { l.insts[rw][id] = n })
		case throttled(err):
			pause()
		}
		if i%4 != 0 {
			continue
		}
		desired := float64(100 + i)
		out, err := sqc.RequestServiceQuotaIncrease(ctx, &sq.RequestServiceQuotaIncreaseInput{ServiceCode: aws.String("ecs"),
			QuotaCode: aws.String(burst), DesiredValue: aws.Float64(desired)})
		if err != nil {
			pause()
			continue
		}
		reqID := aws.ToString(out.RequestedQuota.Id)
		l.add(rw, func() { l.reqs[rw][reqID] = ackReq{desired: desired} })
		if c.approve(ctx, reqID) == nil {
			l.add(rw, func() { l.reqs[rw][reqID] = ackReq{desired: desired, approved: true} })
		}
	}
}

// approve approves a request through the admin API.
func (c *clients) approve(ctx context.Context, id string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+c.addr+"/v1/admin/servicequotas/requests/"+id+"/approve", strings.NewReader(`{"reason":"crashtest"}`))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("approve %s: HTTP %d", id, resp.StatusCode)
	}
	return nil
}

// check reads every writer's instances and request history and returns
// how many acknowledged writes it checked and what it found missing or
// torn.
func (c *clients) check(ctx context.Context, l *ledger) (int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	var lost []string
	for rw, insts := range l.insts {
		key := accessKey(rw[0], rw[1])
		have, err := c.instances(ctx, key, l.services[rw])
		if err != nil {
			return n, append(lost, fmt.Sprintf("%s: listing instances: %v", key, err))
		}
		for id, want := range insts {
			n++
			if got, ok := have[id]; !ok || got != want {
				lost = append(lost, fmt.Sprintf("%s instance %s: %q, want %q", key, id, got, want))
			}
		}
		reqs, err := c.history(ctx, key)
		if err != nil {
			return n, append(lost, fmt.Sprintf("%s: request history: %v", key, err))
		}
		for id, want := range l.reqs[rw] {
			n++
			got, ok := reqs[id]
			switch {
			case !ok:
				lost = append(lost, fmt.Sprintf("%s request %s: missing", key, id))
			case aws.ToFloat64(got.DesiredValue) != want.desired:
				lost = append(lost, fmt.Sprintf("%s request %s: desired %v, want %v", key, id, aws.ToFloat64(got.DesiredValue), want.desired))
			case want.approved && got.Status != "APPROVED", got.Status != "APPROVED" && got.Status != "PENDING":
				lost = append(lost, fmt.Sprintf("%s request %s: %s (approval acknowledged: %v)", key, id, got.Status, want.approved))
			}
		}
	}
	return n, lost
}

// instances lists a service's instances: id -> attribute "n".
func (c *clients) instances(ctx context.Context, key, svc string) (map[string]string, error) {
	out := map[string]string{}
	p := sd.NewListInstancesPaginator(c.sd(key), &sd.ListInstancesInput{ServiceId: aws.String(svc)})
	for p.HasMorePages() {
		page, err := retryCall(ctx, func() (*sd.ListInstancesOutput, error) { return p.NextPage(ctx) })
		if err != nil {
			return nil, err
		}
		for _, in := range page.Instances {
			out[aws.ToString(in.Id)] = in.Attributes["n"]
		}
	}
	return out, nil
}

// history lists an account's requests by id.
func (c *clients) history(ctx context.Context, key string) (map[string]sqRequest, error) {
	out := map[string]sqRequest{}
	p := sq.NewListRequestedServiceQuotaChangeHistoryPaginator(c.sq(key), &sq.ListRequestedServiceQuotaChangeHistoryInput{})
	for p.HasMorePages() {
		page, err := retryCall(ctx, func() (*sq.ListRequestedServiceQuotaChangeHistoryOutput, error) { return p.NextPage(ctx) })
		if err != nil {
			return nil, err
		}
		for _, r := range page.RequestedQuotas {
			out[aws.ToString(r.Id)] = sqRequest{DesiredValue: r.DesiredValue, Status: string(r.Status)}
		}
	}
	return out, nil
}

type sqRequest struct {
	DesiredValue *float64
	Status       string
}

// retryCall calls f again while it is throttled or fails without an
// answer (a connection error: a read's answer says what is stored; a
// failed read says nothing), for up to a minute.
func retryCall[T any](ctx context.Context, f func() (T, error)) (T, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		v, err := f()
		var ae smithy.APIError
		if err == nil || (!throttled(err) && errors.As(err, &ae)) || time.Now().After(deadline) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
