package main

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/process"
	"github.com/tollgate/tollgate/quota"
)

// poolSpecs turns the autoscale sections of cfg into the pool's specs,
// each with a runner for its command.
func poolSpecs(cfg *quota.Config, log *slog.Logger, kr *kubeRunners) ([]pool.ServiceSpec, error) {
	var specs []pool.ServiceSpec
	for _, s := range cfg.Services() {
		a := s.Autoscale
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
		specs = append(specs, pool.ServiceSpec{
			Name:      s.Name,
			Engine:    a.Engine,
			Runner:    r,
			Template:  a.Template(),
			StopGrace: a.StopGrace,
		})
	}
	return specs, nil
}

// newRunner returns the process runner of one autoscaled service. Its
// errors (a command that cannot be run) are config errors.
func newRunner(a *quota.Autoscale, log *slog.Logger) (pool.Runner, error) {
	env := make([]string, 0, len(a.Env))
	for _, e := range a.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	return process.New(process.Options{
		Command:   a.Command[0],
		Args:      append(slices.Clone(a.Command[1:]), a.Args...),
		Env:       env,
		Dir:       a.WorkingDir,
		Readiness: process.Readiness{Path: a.Readiness.Path, Timeout: a.Readiness.Timeout},
		StopGrace: a.StopGrace,
		Logger:    log,
	})
}
