package kube

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/scale"
)

// Target names what a service runs on: a Deployment (or any resource with
// a scale subresource), the Service whose EndpointSlices list its pods,
// and the pod port requests go to.
type Target struct {
	// Namespace holds the Deployment and the Service; required.
	Namespace string
	// Deployment is the scaled resource's name; required.
	Deployment string
	// Service is the Service selecting the Deployment's pods; empty means
	// the Deployment's name.
	Service string
	// Port is the pod port requests are proxied to; 0 means the port of
	// the Service's EndpointSlices when they list exactly one.
	Port int
	// Resource is the scaled resource; empty means apps/deployments.
	Resource schema.GroupResource
}

// String is namespace/deployment, the target's name in logs and metrics.
func (t Target) String() string { return t.Namespace + "/" + t.Deployment }

// Election configures leader election among tollgate replicas serving
// one target: only the holder of the Lease writes replicas. With it, the
// replicas share the Deployment: each reports its ask, the pods it holds
// and its measured load on a second Lease; the holder decides the count
// on the service's total load, which every replica's engine follows, sets
// replicas to it (or the largest fresh ask when more) and lets go only
// pods no replica holds; each replica sends a pod at most its share of
// the maximum concurrency, split by load (runner.LoadSharer). A replica not
// heard from for LeaseDuration stops counting.
type Election struct {
	// LeaseName names the Lease; empty means "tollgate-" + the Deployment.
	LeaseName string
	// ReportLeaseName names the Lease on which every replica reports what
	// it asks for, which pods it holds and its load, one annotation each;
	// empty means LeaseName + "-replicas".
	ReportLeaseName string
	// Namespace holds the Lease; empty means the target's namespace.
	Namespace string
	// Identity is this replica's name (the pod name in a cluster);
	// required.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are those of
	// leaderelection.LeaderElectionConfig; zero means 15 s, 10 s and 2 s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Options configure a Runner. Target, Client and Scales are required; the
// zero value of every other field works.
type Options struct {
	// Target is the Deployment, Service and port.
	Target Target
	// Client watches EndpointSlices, patches pod deletion costs, reads the
	// Deployment and, with Election, holds the Lease.
	Client Client
	// Scales reads and writes the replica count (scale subresource).
	Scales scale.ScalesGetter
	// Metrics reads pod CPU from metrics.k8s.io; nil means CPUTime always
	// reports false.
	Metrics MetricsClient
	// Election, when set, makes replicas written only while this runner
	// holds the Lease.
	Election *Election
	// ReadyTimeout bounds how long a started instance may wait for a pod;
	// 0 means 10 min (an image pull and a slow start).
	ReadyTimeout time.Duration
	// Resync is how often the replica count is read and rewritten if it
	// drifted; 0 means 30 s.
	Resync time.Duration
	// AdoptFor is how long after it starts leading the runner does not
	// lower replicas, so that the pool's first instances can bind to the
	// pods a previous tollgate left running (a rolling update of tollgate)
	// before surplus ones go; the window ends early at the first Stop.
	// 0 means 30 s, negative means no wait.
	// Raising replicas is never held back.
	AdoptFor time.Duration
	// MetricsInterval is how often pod CPU is read; 0 means 15 s, the
	// metrics-server's default resolution.
	MetricsInterval time.Duration
	// Address maps a ready pod to the host:port requests are proxied to;
	// nil means its IP and port. A cluster never needs it; it lets a test
	// against a control plane without kubelets put stand-in servers
	// behind pod IPs, and would let a user reach pods through a tunnel.
	Address func(pod string, ip string, port int) string
	// Logger receives the runner's logs; nil discards them.
	Logger *slog.Logger
	// Registry receives the runner's metrics; nil means a new registry
	// that nothing serves.
	Registry prometheus.Registerer
}

// Errors returned by New and by instances.
var (
	// ErrOptions is wrapped by New's errors about its Options.
	ErrOptions = errors.New("kube: invalid options")
	// ErrPodGone is wrapped by Instance.Err when the instance's pod was
	// deleted or turned not ready.
	ErrPodGone = errors.New("pod left the ready set")
	// ErrReadyTimeout is wrapped by Instance.Ready's error when no pod
	// became ready for the instance within Options.ReadyTimeout.
	ErrReadyTimeout = errors.New("no ready pod within the readiness timeout")
	// ErrStopped is wrapped by Instance.Ready's error after Stop.
	ErrStopped = errors.New("instance stopped")
)

var deployments = schema.GroupResource{Group: "apps", Resource: "deployments"}

func (o *Options) check() error {
	t := &o.Target
	switch {
	case t.Namespace == "":
		return fmt.Errorf("%w: target namespace is empty", ErrOptions)
	case t.Deployment == "":
		return fmt.Errorf("%w: target deployment is empty", ErrOptions)
	case t.Port < 0 || t.Port > 65535:
		return fmt.Errorf("%w: target port %d is out of range", ErrOptions, t.Port)
	case o.Client == nil || o.Scales == nil:
		return fmt.Errorf("%w: Client and Scales are required", ErrOptions)
	case o.Election != nil && o.Election.Identity == "":
		return fmt.Errorf("%w: leader election needs an identity", ErrOptions)
	}
	if t.Service == "" {
		t.Service = t.Deployment
	}
	if t.Resource.Empty() {
		t.Resource = deployments
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 10 * time.Minute
	}
	if o.Resync <= 0 {
		o.Resync = 30 * time.Second
	}
	if o.AdoptFor == 0 {
		o.AdoptFor = 30 * time.Second
	}
	if o.MetricsInterval <= 0 {
		o.MetricsInterval = 15 * time.Second
	}
	if o.Address == nil {
		o.Address = func(_, ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if e := o.Election; e != nil {
		c := *e
		if c.LeaseName == "" {
			c.LeaseName = "tollgate-" + t.Deployment
		}
		if c.ReportLeaseName == "" {
			c.ReportLeaseName = c.LeaseName + "-replicas"
		}
		if c.Namespace == "" {
			c.Namespace = t.Namespace
		}
		if c.LeaseDuration <= 0 {
			c.LeaseDuration = 15 * time.Second
		}
		if c.RenewDeadline <= 0 {
			c.RenewDeadline = 10 * time.Second
		}
		if c.RetryPeriod <= 0 {
			c.RetryPeriod = 2 * time.Second
		}
		o.Election = &c
	}
	return nil
}
