package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/kube"
)

// KubeOptions say how autoscaled services on Kubernetes reach the API
// server. The zero value finds a config as kube.LoadConfig does and runs
// without leader election.
type KubeOptions struct {
	// Kubeconfig is a kubeconfig file; "" means $KUBECONFIG, else the
	// in-cluster config, else ~/.kube/config.
	Kubeconfig string
	// LeaderElect makes only the holder of a Lease write replicas, for
	// several tollgate replicas in front of one Deployment; all route.
	LeaderElect bool
	// Identity is this replica's name in leader election; "" means the
	// host name.
	Identity string
	// LeaseDuration is the Lease's duration in leader election (a killed
	// leader is replaced about this long after its last renewal), with the
	// renew deadline 2/3 of it and the retry period 2/15; 0 means 15 s.
	LeaseDuration time.Duration

	// testClients, when set, are the clients instead of a kubeconfig's,
	// and testOptions changes each runner's options (tests: fake clients
	// and their pods' addresses).
	testClients *kube.Clients
	testOptions func(*kube.Options)
}

// kubeRunners keeps one pool/kube runner per Deployment target across
// reloads, each running until Close: a reload that keeps a target keeps
// its runner (and its watch); a runner of a target no longer named keeps
// running until tollgate stops, so that the revision it served can still
// lower its replicas while it drains.
type kubeRunners struct {
	flags KubeOptions
	log   *slog.Logger
	reg   prometheus.Registerer

	mu      sync.Mutex
	clients *kube.Clients
	runners map[string]*kube.Runner
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	errs    []error

	// namespace is tollgate's own, once a target without one needed it.
	namespace string
}

func newKubeRunners(f KubeOptions, log *slog.Logger, reg prometheus.Registerer) *kubeRunners {
	ctx, cancel := context.WithCancel(context.Background())
	return &kubeRunners{flags: f, log: log, reg: reg, runners: map[string]*kube.Runner{}, ctx: ctx, cancel: cancel}
}

// runner returns the running runner of a's Deployment, making and
// starting it the first time. The API server is first reached here, so
// a config without kubernetes sections never needs one.
func (k *kubeRunners) runner(a *config.Autoscale) (pool.Runner, error) {
	spec := a.Kubernetes
	t := kube.Target{Namespace: spec.Namespace, Deployment: spec.Deployment, Service: spec.Service, Port: spec.Port}
	k.mu.Lock()
	defer k.mu.Unlock()
	if t.Namespace == "" {
		ns, err := k.ownNamespace()
		if err != nil {
			return nil, err
		}
		t.Namespace = ns
	}
	if t.Service == "" {
		t.Service = t.Deployment // kube.Options' default, for checkTraffic
	}
	if err := k.checkTraffic(a, t); err != nil {
		return nil, err
	}
	key := fmt.Sprintf("%s/%s/%d", t, t.Service, t.Port)
	if r, ok := k.runners[key]; ok {
		return r, nil
	}
	if k.clients == nil && k.flags.testClients != nil {
		k.clients = k.flags.testClients
	}
	if k.clients == nil {
		routeClientGoLogs(k.log)
		cfg, err := kube.LoadConfig(k.flags.Kubeconfig)
		if err != nil {
			return nil, err
		}
		c, err := kube.NewClients(cfg)
		if err != nil {
			return nil, err
		}
		k.clients = &c
		k.log.Info("kubernetes API", "host", cfg.Host)
	}
	opts := kube.Options{
		Target:       t,
		Client:       k.clients.Client,
		Scales:       k.clients.Scales,
		Metrics:      k.clients.Metrics,
		ReadyTimeout: a.Readiness.Timeout,
		Logger:       k.log,
		Registry:     k.reg,
	}
	if k.flags.testOptions != nil {
		k.flags.testOptions(&opts)
	}
	if k.flags.LeaderElect {
		id := k.flags.Identity
		if id == "" {
			id, _ = os.Hostname()
		}
		opts.Election = &kube.Election{Identity: id}
		if d := k.flags.LeaseDuration; d > 0 {
			opts.Election.LeaseDuration, opts.Election.RenewDeadline, opts.Election.RetryPeriod = d, d*2/3, d*2/15
		}
	}
	r, err := kube.New(opts)
	if err != nil {
		return nil, err
	}
	k.runners[key] = r
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		if err := r.Run(k.ctx); err != nil {
			k.log.Error("kubernetes runner stopped", "target", t.String(), "error", err)
			k.mu.Lock()
			k.errs = append(k.errs, err)
			k.mu.Unlock()
		}
	}()
	return r, nil
}

// checkTraffic refuses a traffic block a's revisions on Kubernetes
// cannot run: with leader election (several tollgate replicas sharing
// each Deployment), an entry whose revision no entry binds to a
// Deployment (each replica would name revisions on its own, and after
// its own restarts); or with t's Service also selecting the pods of
// another Deployment a runner scales, which would let one revision's
// instances hold the other's pods. The error is a *config.FieldError at
// the entry, or at the traffic block. k.mu is held.
func (k *kubeRunners) checkTraffic(a *config.Autoscale, t kube.Target) error {
	if len(a.Traffic) == 0 {
		return nil
	}
	if k.flags.LeaderElect {
		for _, e := range a.Traffic {
			if e.Revision != "" && boundDeployment(a, e.Revision) == "" {
				at := e.At
				at.Msg = fmt.Sprintf("with --kube-leader-elect (several tollgate replicas), revision %s needs deployment: DEPLOYMENT, the Deployment it runs on, "+
					"so that every replica runs it under that name and splits the same way: add deployment: to this entry", e.Revision)
				return &at
			}
		}
	}
	msg := ""
	for _, r := range k.runners {
		if o := r.Target(); msg == "" && o.Namespace == t.Namespace && o.Service == t.Service && o.Deployment != t.Deployment {
			msg = fmt.Sprintf("Service %s/%s also selects the pods of Deployment %s, an earlier revision's: with traffic, give each revision's Deployment its own Service (kubernetes.service; by default the Deployment's name)",
				t.Namespace, t.Service, o.Deployment)
		}
	}
	if msg == "" {
		return nil
	}
	at := a.Traffic[0].At
	if i := strings.LastIndex(at.Field, "traffic"); i >= 0 {
		at.Field = at.Field[:i+len("traffic")]
	}
	at.Msg = msg
	return &at
}

// boundDeployment is the Deployment a's traffic binds revision to, or ""
// when no entry binds it.
func boundDeployment(a *config.Autoscale, revision string) string {
	for _, e := range a.Traffic {
		if e.Revision == revision && e.Deployment != "" {
			return e.Deployment
		}
	}
	return ""
}

// boundSection is a's section as it would read with kubernetes.deployment
// deployment: the same namespace and port, the Service of the
// Deployment's name; for the runner of a revision the traffic binds to
// deployment.
func boundSection(a *config.Autoscale, deployment string) *config.Autoscale {
	b := *a
	k := *a.Kubernetes
	k.Deployment, k.Service = deployment, deployment
	b.Kubernetes = &k
	return &b
}

// ownNamespace is tollgate's namespace, for a target naming none: found
// once (kube.OwnNamespace) and logged with where it came from. k.mu is
// held.
func (k *kubeRunners) ownNamespace() (string, error) {
	if k.namespace == "" {
		ns, source, err := kube.OwnNamespace(k.flags.Kubeconfig)
		if err != nil {
			return "", err
		}
		k.log.Info("kubernetes namespace of targets naming none", "namespace", ns, "from", source)
		k.namespace = ns
	}
	return k.namespace, nil
}

// Close stops every runner and waits for them. The Deployments keep
// their replicas: the next tollgate adopts the ready pods.
func (k *kubeRunners) Close() {
	k.cancel()
	k.wg.Wait()
}
