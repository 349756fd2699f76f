package main

import (
	"fmt"
	"log/slog"

	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/quota"
)

// poolSpecs turns the autoscale sections of cfg into the pool's specs,
// each with a runner for its command.
func poolSpecs(cfg *quota.Config, log *slog.Logger) ([]pool.ServiceSpec, error) {
	var specs []pool.ServiceSpec
	for _, s := range cfg.Services() {
		a := s.Autoscale
		if a == nil {
			continue
		}
		r, err := newRunner(s.Name, a, log)
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
