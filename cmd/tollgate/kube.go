package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/kube"
)

// kubeFlags are serve's Kubernetes flags.
type kubeFlags struct {
	kubeconfig  string
	leaderElect bool
	identity    string
}

// kubeRunners keeps one pool/kube runner per Deployment target across
// reloads, each running until Close: a reload that keeps a target keeps
// its runner (and its watch); a runner of a target no longer named keeps
// running until tollgate stops, so that the revision it served can still
// lower its replicas while it drains.
type kubeRunners struct {
	flags kubeFlags
	log   *slog.Logger
	reg   prometheus.Registerer

	mu      sync.Mutex
	clients *kube.Clients
	runners map[string]*kube.Runner
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	errs    []error
}

func newKubeRunners(f kubeFlags, log *slog.Logger, reg prometheus.Registerer) *kubeRunners {
	ctx, cancel := context.WithCancel(context.Background())
	return &kubeRunners{flags: f, log: log, reg: reg, runners: map[string]*kube.Runner{}, ctx: ctx, cancel: cancel}
}

// runner returns the running runner of a's Deployment, making and
// starting it the first time. The API server is first reached here, so
// a config without kubernetes sections never needs one.
func (k *kubeRunners) runner(a *config.Autoscale) (pool.Runner, error) {
	spec := a.Kubernetes
	t := kube.Target{Namespace: spec.Namespace, Deployment: spec.Deployment, Service: spec.Service, Port: spec.Port}
	key := fmt.Sprintf("%s/%s/%d", t, t.Service, t.Port)
	k.mu.Lock()
	defer k.mu.Unlock()
	if r, ok := k.runners[key]; ok {
		return r, nil
	}
	if k.clients == nil {
		cfg, err := kube.LoadConfig(k.flags.kubeconfig)
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
	if k.flags.leaderElect {
		id := k.flags.identity
		if id == "" {
			id, _ = os.Hostname()
		}
		opts.Election = &kube.Election{Identity: id}
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

// Close stops every runner and waits for them. The Deployments keep
// their replicas: the next tollgate adopts the ready pods.
func (k *kubeRunners) Close() {
	k.cancel()
	k.wg.Wait()
}
