package main

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/process"
)

// newPools returns the pool of the config's autoscaled services, not yet
// running; its metrics go to reg, instances of services with a
// cloud_map section are listed in registry, and services on Kubernetes
// get their runner from kr.
func newPools(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer, registry *cloudmap.Registry, kr *kubeRunners) (*pool.Pool, error) {
	p := pool.New(pool.Options{Logger: log, Registry: reg})
	if err := applyPools(p, cfg, log, registry, kr); err != nil {
		return nil, err
	}
	return p, nil
}

// applyPools makes p run the autoscaled services of cfg (on a reload:
// new bounds in place, new revisions for changed commands).
func applyPools(p *pool.Pool, cfg *config.Config, log *slog.Logger, registry *cloudmap.Registry, kr *kubeRunners) error {
	specs, err := poolSpecs(cfg, log, registry, kr)
	if err != nil {
		return err
	}
	return p.Apply(specs)
}

// poolSpecs turns the autoscale sections of cfg into the pool's specs,
// each with a runner for its command.
func poolSpecs(cfg *config.Config, log *slog.Logger, registry *cloudmap.Registry, kr *kubeRunners) ([]pool.ServiceSpec, error) {
	var specs []pool.ServiceSpec
	for _, s := range cfg.Quota.Services() {
		a := cfg.Autoscale[s.Name]
		if a == nil {
			continue
		}
		var r pool.Runner
		var err error
		if a.Kubernetes != nil {
			r, err = kr.runner(a)
		} else {
			r, err = newRunner(a, log)
		}
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", s.Name, err)
		}
		spec := pool.ServiceSpec{
			Name:      s.Name,
			Engine:    a.Engine,
			Runner:    r,
			Template:  a.Template(),
			StopGrace: a.StopGrace,

			RequestTimeout: a.RequestTimeout,
			MaxPending:     a.MaxPending,
		}
		if cm := a.CloudMap; cm != nil {
			sc := cloudmap.DefaultScope
			if cm.Account != "" {
				sc.Account = cm.Account
			}
			if cm.Region != "" {
				sc.Region = cm.Region
			}
			spec.Registrar = registry.Registrar(sc, cm.Namespace, cm.Service, cm.Attributes)
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

// newRunner returns the process runner of one autoscaled service. Its
// errors (a command that cannot be run) are config errors.
func newRunner(a *config.Autoscale, log *slog.Logger) (pool.Runner, error) {
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
		Logger:     log,
		Supervisor: supervisor(log),
	})
}

// executable is the path of this program, found once.
var executable = sync.OnceValues(os.Executable)

// supervisor is the instance supervisor every instance's command is
// started through: this executable's hidden `instance-supervisor`
// command, so that when tollgate is killed every process an instance
// started dies too. Without a path to this executable instances are
// started directly (see process.Options.Supervisor).
func supervisor(log *slog.Logger) []string {
	exe, err := executable()
	if err != nil {
		log.Warn("cannot find tollgate's own executable to supervise instances; starting them directly", "err", err)
		return nil
	}
	return []string{exe, process.SupervisorCommand}
}
