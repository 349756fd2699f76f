package pool

import (
	"fmt"
	"slices"
	"time"

	"github.com/tollgate/tollgate/pool/traffic"
)

// Apply makes the pool run exactly specs: new services are added, removed
// ones drained and stopped, and for the others new targets and bounds are
// applied to the running engine without restarting an instance, or, when
// the Template changed, a new revision rolls out. A spec that cannot be
// used fails the whole call, with an error wrapping ErrInvalidSpec or
// autoscale.ErrInvalidConfig, and changes nothing. With
// Options.Revisions it returns once what it changed is kept; a service
// it adds takes the revisions kept of it (see RevisionStore).
func (p *Pool) Apply(specs []ServiceSpec) error {
	err := p.apply(specs)
	if serr := p.endApply(); err == nil {
		err = serr
	}
	return err
}

func (p *Pool) apply(specs []ServiceSpec) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[string]bool{}
	for _, s := range specs {
		if s.Name == "" || s.Runner == nil {
			return fmt.Errorf("%w: service %q needs a name and a runner", ErrInvalidSpec, s.Name)
		}
		if seen[s.Name] {
			return fmt.Errorf("%w: service %q given twice", ErrInvalidSpec, s.Name)
		}
		seen[s.Name] = true
		if s.RequestTimeout < 0 || s.RequestTimeout > MaxRequestTimeout || s.MaxPending < 0 || s.MaxPending > MaxMaxPending {
			return fmt.Errorf("%w: service %q: request timeout %v not in [0, %v] or max pending %d not in [0, %d]",
				ErrInvalidSpec, s.Name, s.RequestTimeout, MaxRequestTimeout, s.MaxPending, MaxMaxPending)
		}
		if s.RolloutTimeout < 0 || s.RolloutTimeout > MaxRolloutTimeout {
			return fmt.Errorf("%w: service %q: rollout timeout %v not in [0, %v]", ErrInvalidSpec, s.Name, s.RolloutTimeout, MaxRolloutTimeout)
		}
		if s.Liveness != nil {
			if err := s.Liveness.Validate(); err != nil {
				return fmt.Errorf("%w: service %q: %w", ErrInvalidSpec, s.Name, err)
			}
		}
		if err := s.Engine.Validate(); err != nil {
			return fmt.Errorf("service %s: %w", s.Name, err)
		}
		if err := traffic.Check(s.Name, s.Traffic); err != nil {
			return err
		}
		if err := s.Sticky.Check(s.Name); err != nil {
			return err
		}
		if err := checkBoundSpec(s); err != nil {
			return err
		}
		svc := p.services[s.Name]
		if svc == nil {
			var err error
			if svc, err = p.newService(s); err != nil {
				return err
			}
		}
		next := ""
		if svc.latest == nil {
			next = p.firstName(svc, s)
		} else if s.Template != svc.spec.Template {
			next = svc.nextName(s)
		}
		if err := svc.checkBound(s, next); err != nil {
			return err
		}
		if err := svc.checkNames(s.Traffic, next, boundNames(s)); err != nil {
			return err
		}
	}
	for name, svc := range p.services {
		if !seen[name] {
			delete(p.services, name)
			for _, rv := range svc.revs {
				rv.Retire(p.drainBound(rv, time.Now()))
			}
			p.log.Info("service removed; draining its instances", "service", name)
		}
	}
	for _, s := range specs {
		svc, ok := p.services[s.Name]
		if !ok {
			svc, err := p.newService(s)
			if err != nil {
				return err
			}
			svc.spec, svc.traffic = s, s.Traffic
			svc.sticky.Store(stickyOf(s.Sticky))
			rv, err := p.newRevision(svc, s, s.Engine, p.firstName(svc, s))
			if err != nil {
				return err
			}
			svc.cur.Store(rv)
			svc.latest, svc.revs = rv, []*rev{rv}
			if err := p.addBound(svc, s); err != nil {
				return err
			}
			if err := p.restoreTraffic(svc, s); err != nil {
				return err
			}
			p.services[s.Name] = svc
			p.reroute(svc)
			p.start(rv)
			continue
		}
		if err := p.addBound(svc, s); err != nil {
			return err
		}
		if err := p.revive(svc, s.Traffic); err != nil {
			return err
		}
		old := svc.spec
		svc.spec = s
		svc.sticky.Store(stickyOf(s.Sticky))
		moved := !slices.Equal(s.Traffic, old.Traffic)
		if moved {
			p.dropSetTraffic(s.Name)
		}
		if s.Template == old.Template {
			if err := svc.latest.SetConfig(s.Engine, s.limits()); err != nil {
				return err
			}
			if moved {
				p.shift(svc, s.Traffic, "reload")
			} else {
				p.reroute(svc)
			}
			continue
		}
		prev := svc.traffic
		if moved {
			// A pending change gives way to the new revision's traffic.
			svc.shiftGen++
			for _, rv := range svc.revs {
				rv.SetFloor(0)
			}
			svc.traffic = s.Traffic
		}
		if err := p.rollout(svc, s, prev); err != nil {
			return err
		}
	}
	return nil
}
