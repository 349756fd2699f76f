package node

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/kube"
	"github.com/tollgate/tollgate/pool/process"
	"github.com/tollgate/tollgate/pool/traffic"
)

// pools turns the config's autoscale sections into the pool's specs:
// instances of services with a cloud_map section are listed in registry,
// services on Kubernetes get their runner from kube, and local processes
// start through supervisor (see Options.Supervisor).
type pools struct {
	log        *slog.Logger
	registry   *cloudmap.Registry
	kube       *kubeRunners
	supervisor []string
	ports      process.PortRange // Options.InstancePorts
	kept       revisionRecords   // keep the revisions and the admin traffic; nil: the process does
}

// newPool returns the pool of the config's autoscaled services, not yet
// running; its metrics go to reg.
func (b pools) newPool(cfg *config.Config, reg prometheus.Registerer) (*pool.Pool, error) {
	opts := pool.Options{Logger: b.log, Registry: reg}
	if b.kept != nil {
		opts.Revisions = revisionStore{records: b.kept, pools: b}
	}
	p := pool.New(opts)
	if err := b.apply(p, cfg); err != nil {
		return nil, err
	}
	b.warnRenumbered(cfg)
	return p, nil
}

// warnRenumbered warns, at start, of each service on Kubernetes whose
// traffic names revisions no entry binds to a Deployment (deployment:):
// revision names live in the process, so the config's Deployment is
// revision 1 again (or the one after the highest bound) and the
// Deployments those revisions ran on before the restart are neither
// routed to nor scaled. With a data directory or Redis the names are kept.
func (b pools) warnRenumbered(cfg *config.Config) {
	if b.kept != nil {
		return // the data directory or Redis keeps the names
	}
	for _, s := range cfg.Quota.Services() {
		a := cfg.Autoscale[s.Name]
		if a == nil || a.Kubernetes == nil {
			continue
		}
		var named []string
		for _, e := range a.Traffic {
			if e.Revision != "" && boundDeployment(a, e.Revision) == "" && !slices.Contains(named, e.Revision) {
				named = append(named, e.Revision)
			}
		}
		if len(named) > 0 {
			b.log.Warn("traffic names revisions without deployment:, but revision names begin again at start: "+
				"the Deployment the config names is the first revision not bound, and Deployments of revisions from before the restart are neither routed to nor scaled; "+
				"add deployment: DEPLOYMENT to each such entry to run the revision under its name on that Deployment",
				"service", s.Name, "deployment", a.Kubernetes.Deployment, "named", named)
		}
	}
}

// apply makes p run the autoscaled services of cfg (on a reload: new
// bounds in place, new revisions for changed commands, new traffic). A
// traffic entry naming a revision p does not run is refused, naming
// where the config writes it.
func (b pools) apply(p *pool.Pool, cfg *config.Config) error {
	specs, err := b.specs(cfg)
	if err != nil {
		return err
	}
	err = p.Apply(specs)
	var te *traffic.Error
	if errors.As(err, &te) {
		if a := cfg.Autoscale[te.Service]; a != nil && te.Entry < len(a.Traffic) && len(a.Traffic) > 0 {
			at := a.Traffic[max(te.Entry, 0)].At
			if te.Entry < 0 { // the block as a whole: placed at its first entry
				at.Field = at.Field[:strings.LastIndex(at.Field, "traffic")+len("traffic")]
			}
			at.Msg = te.Msg
			return &at
		}
	}
	return err
}

// trafficOf is a's traffic block as the pool takes it.
func trafficOf(a *config.Autoscale) []traffic.Target {
	if len(a.Traffic) == 0 {
		return nil
	}
	out := make([]traffic.Target, 0, len(a.Traffic))
	for _, e := range a.Traffic {
		out = append(out, traffic.Target{RevisionName: e.Revision, LatestRevision: e.LatestRevision, Percent: e.Percent, Tag: e.Tag})
	}
	return out
}

// sticky is a's sticky block as the pool takes it: the zero value (per
// request) when there is none.
func sticky(a *config.Autoscale) traffic.Sticky {
	if a.Sticky == nil {
		return traffic.Sticky{}
	}
	return traffic.Sticky{Header: a.Sticky.Header, Cookie: a.Sticky.Cookie, ClientAddress: a.Sticky.ClientAddress}
}

// specs turns the autoscale sections of cfg into the pool's specs, each
// with a runner for its command.
func (b pools) specs(cfg *config.Config) ([]pool.ServiceSpec, error) {
	var specs []pool.ServiceSpec
	for _, s := range cfg.Quota.Services() {
		a := cfg.Autoscale[s.Name]
		if a == nil {
			continue
		}
		spec, err := b.spec(s.Name, a)
		if err != nil {
			return nil, err
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

// spec is the pool's spec of the autoscale section a of service name,
// with a runner for its command.
func (b pools) spec(name string, a *config.Autoscale) (pool.ServiceSpec, error) {
	var r pool.Runner
	var err error
	if a.Kubernetes != nil {
		r, err = b.kube.runner(a)
	} else {
		r, err = b.runner(a)
	}
	if err != nil {
		return pool.ServiceSpec{}, fmt.Errorf("service %s: %w", name, err)
	}
	bound, err := b.bound(a, r)
	if err != nil {
		return pool.ServiceSpec{}, fmt.Errorf("service %s: %w", name, err)
	}
	recipe, err := recipeOf(a)
	if err != nil {
		return pool.ServiceSpec{}, fmt.Errorf("service %s: %w", name, err)
	}
	spec := pool.ServiceSpec{
		Name:      name,
		Recipe:    recipe,
		Engine:    a.Engine,
		Runner:    r,
		Template:  a.Template(),
		StopGrace: a.StopGrace,

		RequestTimeout: a.RequestTimeout,
		MaxPending:     a.MaxPending,
		RolloutTimeout: a.RolloutTimeout,
		Traffic:        trafficOf(a),
		Sticky:         sticky(a),
		Bound:          bound,
	}
	if a.Kubernetes != nil && b.kube != nil && b.kube.flags.LeaderElect {
		spec.TrafficFixed = "with several tollgate replicas (--kube-leader-elect), traffic is set in the config's traffic: block, which every replica reloads, not per replica through the admin API"
	}
	if l := a.Liveness; l != nil {
		spec.Liveness = &pool.Liveness{Path: l.Path, Period: l.Period, Timeout: l.Timeout,
			FailureThreshold: l.FailureThreshold, InitialDelay: l.InitialDelay}
	}
	if cm := a.CloudMap; cm != nil {
		sc := cloudmap.DefaultScope
		if cm.Account != "" {
			sc.Account = cm.Account
		}
		if cm.Region != "" {
			sc.Region = cm.Region
		}
		spec.Registrar = b.registry.Registrar(sc, cm.Namespace, cm.Service, cm.Attributes)
	}
	return spec, nil
}

// runner returns the process runner of one autoscaled service. Its
// errors (a command that cannot be run) are config errors.
func (b pools) runner(a *config.Autoscale) (pool.Runner, error) {
	env := make([]string, 0, len(a.Env))
	for _, e := range a.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	return process.New(process.Options{
		Command:    a.Command[0],
		Args:       append(slices.Clone(a.Command[1:]), a.Args...),
		Env:        env,
		Dir:        a.WorkingDir,
		Readiness:  process.Readiness{Path: a.Readiness.Path, Timeout: a.Readiness.Timeout},
		StopGrace:  a.StopGrace,
		CPUs:       a.Engine.CPUsPerInstance, // 0 when cpus is not set: no limit
		Memory:     a.Memory,
		Logger:     b.log,
		Supervisor: b.supervisor,
		Ports:      b.ports,
	})
}

// bound is the revisions a's traffic binds to Deployments, each with the
// runner of its Deployment (the section's own, r, marked the latest).
func (b pools) bound(a *config.Autoscale, r pool.Runner) ([]pool.BoundRevision, error) {
	var out []pool.BoundRevision
	seen := map[string]bool{}
	for i, e := range a.Traffic {
		if e.Deployment == "" || seen[e.Revision] || a.Kubernetes == nil {
			continue
		}
		seen[e.Revision] = true
		br := pool.BoundRevision{Name: e.Revision, Runner: r, Latest: e.Deployment == a.Kubernetes.Deployment, Entry: i}
		if !br.Latest {
			var err error
			if br.Runner, err = b.kube.runner(boundSection(a, e.Deployment)); err != nil {
				return nil, err
			}
		}
		if kr, ok := br.Runner.(interface{ Target() kube.Target }); ok {
			br.Where = "Deployment " + kr.Target().String()
		}
		out = append(out, br)
	}
	return out, nil
}
