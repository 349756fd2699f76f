package pool

// This file keeps a service's revisions across restarts through a
// RevisionStore (Options.Revisions): the number of the last revision
// made, the latest revision's name and the others' (with what it takes
// to make them again), and the traffic SetTraffic set, so that a restart
// neither renames revisions nor forgets a rollback target or an
// operator's split.

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/pool/traffic"
)

// ErrNotKept is wrapped by SetTraffic's error when the traffic moved but
// the RevisionStore failed to keep it: it holds until a restart.
var ErrNotKept = errors.New("pool: the change was made but could not be kept")

// restore reads what the store kept of service, once per Apply; nil when
// nothing or without a store. A store that fails to read is an error:
// starting without the state would rename revisions.
func (p *Pool) restore(service string) (*SavedRevisions, error) {
	ps := p.persist
	if ps == nil {
		return nil, nil
	}
	if sv, ok := ps.loaded[service]; ok {
		return sv, nil
	}
	sv, ok, err := ps.store.LoadRevisions(service)
	if err != nil {
		return nil, fmt.Errorf("service %s: reading its revisions: %w", service, err)
	}
	var out *SavedRevisions
	if ok {
		out = &sv
	}
	ps.loaded[service] = out
	return out, nil
}

// newService is a service not yet run by p, with the revisions the
// store kept of it: its revision count and, kept scaled to zero, its
// revisions other than the one s makes; p.mu is held.
func (p *Pool) newService(s ServiceSpec) (*service, error) {
	svc := &service{name: s.Name}
	if p.persist != nil {
		delete(p.persist.put, s.Name) // of a service removed and added again: the store has its last word
	}
	sv, err := p.restore(s.Name)
	if err != nil || sv == nil {
		return svc, err
	}
	svc.number = sv.Number
	now := time.Now()
	others := sv.Others
	if sv.Latest.Template != s.Template || latestBound(s) != "" {
		others = append(slices.Clone(others), sv.Latest)
	}
	for _, o := range others {
		if o.Retired.IsZero() {
			o.Retired = now
		}
		// No runner until it runs again (keptSpec); its Template is kept.
		svc.kept = append(svc.kept, keptRevision{name: o.Name, spec: ServiceSpec{Template: o.Template}, where: o.Where,
			created: o.Created, retired: o.Retired, recipe: o.Recipe})
	}
	svc.kept = gcKept(svc.kept, now)
	return svc, nil
}

// latestBound is the name s binds its latest revision to, or "".
func latestBound(s ServiceSpec) string {
	for _, b := range s.Bound {
		if b.Latest {
			return b.Name
		}
	}
	return ""
}

// firstName is the name of the revision s makes for svc, which p does
// not run yet: the latest revision kept from before the restart when s
// has its Template, else the next; p.mu is held.
func (p *Pool) firstName(svc *service, s ServiceSpec) string {
	if p.persist != nil && latestBound(s) == "" {
		if sv := p.persist.loaded[s.Name]; sv != nil && sv.Latest.Template == s.Template && sv.Latest.Name != "" {
			return sv.Latest.Name
		}
	}
	return svc.nextName(s)
}

// restoreTraffic gives svc, just made from s, the traffic SetTraffic set
// before the restart, when s's traffic is still the one it replaced and
// every revision it names runs or is kept; else it logs why not and
// keeps s's; p.mu is held.
func (p *Pool) restoreTraffic(svc *service, s ServiceSpec) error {
	if p.persist == nil {
		return nil
	}
	sv := p.persist.loaded[s.Name]
	if sv != nil {
		if created := sv.Latest.Created; svc.latest.Name() == sv.Latest.Name && !created.IsZero() {
			svc.latest.created = created
		}
	}
	if sv == nil || !sv.TrafficSet {
		return p.revive(svc, svc.traffic)
	}
	if !slices.Equal(sv.SpecTraffic, s.Traffic) {
		p.log.Info("the config's traffic changed since the admin API set it: the config's is in force", "service", s.Name,
			"kept", trafficString(sv.Traffic))
		return p.revive(svc, svc.traffic)
	}
	if err := traffic.Check(s.Name, sv.Traffic); err != nil {
		p.log.Warn("the traffic set through the admin API before the restart is not valid: the config's is in force", "service", s.Name, "error", err)
		return p.revive(svc, svc.traffic)
	}
	if err := svc.checkNames(sv.Traffic, "", boundNames(s)); err != nil {
		p.log.Warn("the traffic set through the admin API before the restart names a revision that is gone: the config's is in force", "service", s.Name,
			"kept", trafficString(sv.Traffic), "error", err)
		return p.revive(svc, svc.traffic)
	}
	if err := p.resolveKept(svc, sv.Traffic); err != nil {
		p.log.Warn("the traffic set through the admin API before the restart names a revision that cannot run again: the config's is in force", "service", s.Name,
			"kept", trafficString(sv.Traffic), "error", err)
		return p.revive(svc, svc.traffic)
	}
	if err := p.revive(svc, sv.Traffic); err != nil {
		return err
	}
	svc.traffic = slices.Clone(sv.Traffic)
	p.persist.put[s.Name] = putTraffic{traffic: slices.Clone(sv.Traffic), spec: slices.Clone(s.Traffic)}
	p.log.Info("traffic set through the admin API before the restart restored", "service", s.Name, "traffic", trafficString(sv.Traffic))
	return nil
}

// snapshot is what the store keeps of svc now; p.mu is held.
func (p *Pool) snapshot(svc *service) SavedRevisions {
	at := func(t time.Time) time.Time {
		if t.IsZero() {
			return t
		}
		return t.Round(0).UTC()
	}
	saved := func(rv *rev) SavedRevision {
		return SavedRevision{Name: rv.Name(), Template: rv.spec.Template, Recipe: rv.spec.Recipe, Where: rv.where, Created: at(rv.created)}
	}
	sv := SavedRevisions{Service: svc.name, Number: svc.number, Latest: saved(svc.latest), Others: []SavedRevision{}}
	for _, k := range svc.kept {
		if svc.revisionByName(k.name) == nil {
			sv.Others = append(sv.Others, SavedRevision{Name: k.name, Template: k.spec.Template, Recipe: k.recipeOf(), Where: k.where,
				Created: at(k.created), Retired: at(k.retired)})
		}
	}
	for _, rv := range svc.revs {
		if rv != svc.latest {
			sv.Others = append(sv.Others, saved(rv))
		}
	}
	if pt, ok := p.persist.put[svc.name]; ok {
		sv.TrafficSet, sv.Traffic, sv.SpecTraffic = true, pt.traffic, pt.spec
	}
	return sv
}

// recipeOf is the recipe k is made again from.
func (k *keptRevision) recipeOf() []byte {
	if k.spec.Recipe != nil {
		return k.spec.Recipe
	}
	return k.recipe
}

// save keeps, in one write, the state of every service (or of only) that
// changed since it was last kept; without a store it does nothing.
func (p *Pool) save(only string) error {
	ps := p.persist
	if ps == nil {
		return nil
	}
	ps.saveMu.Lock()
	defer ps.saveMu.Unlock()
	p.mu.RLock()
	var changed []SavedRevisions
	for name, svc := range p.services {
		if (only != "" && name != only) || svc.latest == nil {
			continue
		}
		sv := p.snapshot(svc)
		if last, ok := ps.last[name]; !ok || !reflect.DeepEqual(last, sv) {
			changed = append(changed, sv)
		}
	}
	p.mu.RUnlock()
	if len(changed) == 0 {
		return nil
	}
	slices.SortFunc(changed, func(a, b SavedRevisions) int { return strings.Compare(a.Service, b.Service) })
	if err := ps.store.SaveRevisions(changed); err != nil {
		return fmt.Errorf("%w: %w", ErrNotKept, err)
	}
	for _, sv := range changed {
		ps.last[sv.Service] = sv
	}
	return nil
}

// noteSetTraffic records t as set by SetTraffic for service, if it is
// the traffic in force (no later change took over), and keeps it.
func (p *Pool) noteSetTraffic(service string, t []traffic.Target) error {
	if p.persist == nil {
		return nil
	}
	p.mu.Lock()
	if svc := p.services[service]; svc != nil && slices.Equal(svc.traffic, t) {
		p.persist.put[service] = putTraffic{traffic: slices.Clone(t), spec: slices.Clone(svc.spec.Traffic)}
	}
	p.mu.Unlock()
	return p.save(service)
}

// dropSetTraffic forgets the traffic SetTraffic set for service, once a
// spec with other traffic replaced it; p.mu is held.
func (p *Pool) dropSetTraffic(service string) {
	if p.persist != nil {
		delete(p.persist.put, service)
	}
}

// endApply saves what an Apply changed and forgets what it read.
func (p *Pool) endApply() error {
	if p.persist == nil {
		return nil
	}
	p.mu.Lock()
	clear(p.persist.loaded)
	p.mu.Unlock()
	return p.save("")
}
