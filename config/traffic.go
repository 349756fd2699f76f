package config

// This file reads an autoscale section's traffic block: Knative's and
// Cloud Run's split of a service's requests over its revisions.

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxTrafficRevisions bounds the revisions one traffic block names, the
// latest included: the pool keeps at most that many running per service.
const MaxTrafficRevisions = 10

// tagPattern is a tag: a lower-case DNS label without "--", so that the
// first "---" of a Host ends it (traffic.TagPattern is the same).
var tagPattern = regexp.MustCompile(`^[a-z]([a-z0-9]|-[a-z0-9]){0,62}$`)

// TrafficTarget is one entry of an autoscaled service's traffic block:
// a revision by name or the latest ready one, the percent of untagged
// requests it takes, and a tag that reaches it directly (a request with
// Host TAG---... or header X-Tollgate-Revision-Tag: TAG).
type TrafficTarget struct {
	// Revision names a revision the pool runs: the service's name and
	// its number, such as hello-00002 (revision).
	Revision string
	// LatestRevision follows the latest ready revision instead
	// (latest_revision: true).
	LatestRevision bool
	// Percent is in [0, 100]; the block's sum to 100. 0 (or no
	// percent) needs a tag.
	Percent int
	// Tag is a lower-case DNS label without "--"; unique in the block.
	Tag string
	// Deployment, on Kubernetes only, binds Revision to a Deployment in
	// the section's namespace (deployment): the pool runs the revision
	// under that name on that Deployment, reached through the Service of
	// the Deployment's name on the section's port, at start and at every
	// reload, so that the names and the split survive a restart and agree
	// on every tollgate replica. Empty: the revision is whichever the
	// pool runs under that name.
	Deployment string
	// DeploymentAt is where Deployment is written, Msg empty.
	DeploymentAt FieldError
	// At is where the entry's revision (or the entry, for the latest) is
	// written, Msg empty, for the errors only the pool can find: a
	// revision it does not run.
	At FieldError
}

// traffic reads a traffic block: a list of entries whose percents sum to
// 100. Whether each revision is the service's is checkTrafficNames'.
func (p *parser) traffic(n *yaml.Node, path string) ([]TrafficTarget, bool) {
	items := p.list(n, path)
	if n.Kind != yaml.SequenceNode {
		return nil, false
	}
	if len(items) == 0 {
		p.errorf(n, path, "empty: give entries such as {latest_revision: true, percent: 100}, or leave traffic out")
		return nil, false
	}
	ok := true
	out := make([]TrafficTarget, 0, len(items))
	tags := map[string]string{} // tag: the field that gave it
	revs := map[string]bool{}
	sum := 0
	for i, it := range items {
		f := fmt.Sprintf("%s[%d]", path, i)
		e := TrafficTarget{At: FieldError{File: p.file, Line: it.Line, Column: it.Column, Field: f}}
		good, before := true, len(p.w.Errs)
		var revNode, tagNode, depNode *yaml.Node
		p.fields(it, f, map[string]func(k, v *yaml.Node, f string){
			"revision": func(_, v *yaml.Node, f string) {
				revNode = v
				s, g := p.str(v, f)
				good = good && g
				e.Revision = s
				e.At = FieldError{File: p.file, Line: v.Line, Column: v.Column, Field: f}
			},
			"latest_revision": func(_, v *yaml.Node, f string) {
				if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" || v.Decode(&e.LatestRevision) != nil {
					p.errorf(v, f, "want true or false, got %s", kindName(v))
					good = false
				}
			},
			"percent": func(_, v *yaml.Node, f string) {
				x, g := p.integer(v, f)
				if g && (x < 0 || x > 100) {
					p.errorf(v, f, "%d not in [0, 100]", x)
					g = false
				}
				good = good && g
				e.Percent = int(x)
			},
			"deployment": func(_, v *yaml.Node, f string) {
				depNode = v
				s, g := p.str(v, f)
				if g && !dnsLabel().MatchString(s) {
					p.errorf(v, f, "%q is not a Kubernetes name (lower-case letters, digits and -, at most 63)", s)
					g = false
				}
				good = good && g
				e.Deployment = s
				e.DeploymentAt = FieldError{File: p.file, Line: v.Line, Column: v.Column, Field: f}
			},
			"tag": func(_, v *yaml.Node, f string) {
				tagNode = v
				s, g := p.str(v, f)
				if g && !tagPattern.MatchString(s) {
					p.errorf(v, f, "%q is not a tag: a lower-case DNS label without \"--\", such as canary", s)
					g = false
				}
				good = good && g
				e.Tag = s
			},
		})
		if !good || len(p.w.Errs) > before { // an unknown or repeated field too
			ok = false
			continue
		}
		switch {
		case e.LatestRevision == (revNode != nil):
			p.errorf(it, f, "give either revision: NAME or latest_revision: true")
			ok = false
			continue
		case e.Percent == 0 && e.Tag == "":
			p.errorf(it, f, "percent 0 without a tag reaches nothing: give a percent or a tag")
			ok = false
			continue
		case depNode != nil && e.LatestRevision:
			p.errorf(depNode, joinField(f, "deployment"), "not with latest_revision: the latest revision runs the section's kubernetes.deployment; bind a revision: NAME instead")
			ok = false
			continue
		}
		if prev, dup := tags[e.Tag]; dup && e.Tag != "" {
			p.errorf(tagNode, joinField(f, "tag"), "%q is already the tag of %s", e.Tag, prev)
			ok = false
			continue
		}
		tags[e.Tag] = f
		revs[e.Revision] = true // "" is the latest
		sum += e.Percent
		out = append(out, e)
	}
	if !ok {
		return nil, false
	}
	if sum != 100 {
		p.errorf(n, path, "percents sum to %d, not 100", sum)
		return nil, false
	}
	if len(revs) > MaxTrafficRevisions {
		p.errorf(n, path, "%d revisions; a service keeps at most %d running", len(revs), MaxTrafficRevisions)
		return nil, false
	}
	return out, true
}

// checkTrafficNames reports the traffic entries of a that name a revision
// of another service than service, and the deployment bindings that
// cannot hold (checkBindings).
func (p *parser) checkTrafficNames(a *Autoscale, service string) bool {
	ok := true
	for _, e := range a.Traffic {
		if e.Revision != "" && !strings.HasPrefix(e.Revision, service+"-") {
			at := e.At
			at.Msg = fmt.Sprintf("%q is not a revision of service %s (%s-00001, %s-00002, ...)", e.Revision, service, service, service)
			p.w.Errs = append(p.w.Errs, &at)
			ok = false
		}
	}
	return ok && p.checkBindings(a, service)
}

// RevisionNumber is the number of a revision named as the pool names
// them, service-NNNNN (hello-00002: 2), or 0 for another name.
func RevisionNumber(service, name string) int {
	digits, ok := strings.CutPrefix(name, service+"-")
	if !ok || len(digits) < 5 {
		return 0
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 || fmt.Sprintf("%05d", n) != digits {
		return 0
	}
	return n
}

// checkBindings reports the deployment bindings of a's traffic that
// cannot hold: one without a kubernetes section, a revision not named as
// the pool names them, a revision bound to two Deployments or a
// Deployment to two revisions, and the section's own Deployment bound
// to a revision older than another bound one (it runs the latest
// revision, the newest: the pool numbers the next revision after the
// highest bound one).
func (p *parser) checkBindings(a *Autoscale, service string) bool {
	bad := func(e TrafficTarget, format string, args ...any) bool {
		at := e.DeploymentAt
		at.Msg = fmt.Sprintf(format, args...)
		p.w.Errs = append(p.w.Errs, &at)
		return false
	}
	byRev := map[string]TrafficTarget{} // revision: the entry binding it
	byDep := map[string]TrafficTarget{} // deployment: the entry binding it
	var own *TrafficTarget              // the entry binding the section's Deployment
	highest := 0                        // the highest bound revision number
	for i, e := range a.Traffic {
		if e.Deployment == "" {
			continue
		}
		if a.Kubernetes == nil {
			return bad(e, "binds revision %s to a Kubernetes Deployment, but the service has no kubernetes: section (its revisions are processes)", e.Revision)
		}
		n := RevisionNumber(service, e.Revision)
		if n == 0 {
			return bad(e, "a bound revision is named as tollgate names revisions, %s-00001, %s-00002, ..., not %q", service, service, e.Revision)
		}
		if prev, dup := byRev[e.Revision]; dup && prev.Deployment != e.Deployment {
			return bad(e, "revision %s is already bound to deployment %s (%s): a revision runs on one Deployment", e.Revision, prev.Deployment, prev.DeploymentAt.Field)
		}
		if prev, dup := byDep[e.Deployment]; dup && prev.Revision != e.Revision {
			return bad(e, "deployment %s is already bound to revision %s (%s): a Deployment runs one revision", e.Deployment, prev.Revision, prev.DeploymentAt.Field)
		}
		byRev[e.Revision], byDep[e.Deployment] = e, e
		if e.Deployment == a.Kubernetes.Deployment {
			own = &a.Traffic[i]
		}
		highest = max(highest, n)
	}
	if own != nil && RevisionNumber(service, own.Revision) < highest {
		return bad(*own, "deployment %s is this section's kubernetes.deployment, which runs the latest revision, the newest: bind it to a revision numbered above every other bound one (%s-%05d or later), or leave deployment: out of this entry",
			own.Deployment, service, highest+1)
	}
	return true
}
