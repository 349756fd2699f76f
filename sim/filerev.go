package sim

// This file reads and writes a scenario file's revisions and traffic:
// the backend's revisions, traffic and traffic_changes, in the shape of
// the server's config (traffic entries of revision or latest_revision,
// percent and tag).

import (
	"time"

	"go.yaml.in/yaml/v3"
)

type fileRevision struct {
	At            time.Duration `yaml:"at"`
	ServiceTime   time.Duration `yaml:"service_time"`
	CPUPerRequest float64       `yaml:"cpu_per_request"`
	ColdStart     time.Duration `yaml:"cold_start"`
	Traffic       []fileTraffic `yaml:"traffic"`
}

type fileTraffic struct {
	Revision       string `yaml:"revision"`
	LatestRevision bool   `yaml:"latest_revision"`
	Percent        int    `yaml:"percent"`
	Tag            string `yaml:"tag"`
}

type fileTrafficChange struct {
	At      time.Duration `yaml:"at"`
	Traffic []fileTraffic `yaml:"traffic"`
}

// trafficOf converts a file's traffic block; nil for none.
func trafficOf(ft []fileTraffic) []TrafficTarget {
	if ft == nil {
		return nil
	}
	out := make([]TrafficTarget, len(ft))
	for i, e := range ft {
		out[i] = TrafficTarget{Revision: e.Revision, LatestRevision: e.LatestRevision, Percent: e.Percent, Tag: e.Tag}
	}
	return out
}

// revisionsOf converts a file's revisions.
func revisionsOf(fr []fileRevision) []Revision {
	var out []Revision
	for _, r := range fr {
		out = append(out, Revision{At: r.At, ServiceTime: r.ServiceTime, CPUPerRequest: r.CPUPerRequest, ColdStart: r.ColdStart, Traffic: trafficOf(r.Traffic)})
	}
	return out
}

// changesOf converts a file's traffic changes.
func changesOf(fc []fileTrafficChange) []TrafficChange {
	var out []TrafficChange
	for _, c := range fc {
		out = append(out, TrafficChange{At: c.At, Traffic: trafficOf(c.Traffic)})
	}
	return out
}

// trafficNode writes a traffic block, one flow mapping an entry.
func trafficNode(t []TrafficTarget) *yaml.Node {
	seq := &yaml.Node{Kind: yaml.SequenceNode}
	for _, e := range t {
		m := newMap().flow()
		if e.LatestRevision {
			m.add("latest_revision", true)
		} else {
			m.add("revision", e.Revision)
		}
		m.add("percent", e.Percent)
		if e.Tag != "" {
			m.add("tag", e.Tag)
		}
		seq.Content = append(seq.Content, m.n)
	}
	return seq
}

// addRevisions writes b's service, revisions and traffic into m, when b
// has any.
func addRevisions(m ymap, b Backend) {
	m.add("gpu", b.Autoscale.GPUs, "GPUs per instance: idle instances kept 10 minutes, not 15")
	if !b.hasRevisions() {
		return
	}
	m.add("service", b.Service, "its revisions are SERVICE-00001, ...")
	m.add("request_timeout", b.RequestTimeout, "bounds a replaced revision's drain, with 15 minutes")
	m.add("rollout_timeout", b.RolloutTimeout)
	if len(b.Revisions) > 0 {
		seq := &yaml.Node{Kind: yaml.SequenceNode}
		for _, rv := range b.Revisions {
			r := newMap()
			r.add("at", rv.At)
			if rv.ServiceTime != 0 {
				r.add("service_time", rv.ServiceTime)
			}
			if rv.CPUPerRequest != 0 {
				r.add("cpu_per_request", rv.CPUPerRequest)
			}
			if rv.ColdStart != 0 {
				r.add("cold_start", rv.ColdStart)
			}
			if rv.Traffic != nil {
				r.add("traffic", trafficNode(rv.Traffic))
			}
			seq.Content = append(seq.Content, r.n)
		}
		m.add("revisions", seq)
	}
	if len(b.Traffic) > 0 {
		m.add("traffic", trafficNode(b.Traffic))
	}
	if len(b.TrafficChanges) > 0 {
		seq := &yaml.Node{Kind: yaml.SequenceNode}
		for _, c := range b.TrafficChanges {
			r := newMap()
			r.add("at", c.At)
			r.add("traffic", trafficNode(c.Traffic))
			seq.Content = append(seq.Content, r.n)
		}
		m.add("traffic_changes", seq)
	}
}

// addRunTask writes a client group's tag and RunTask parameters into g.
func addRunTask(g ymap, c Clients) {
	if c.Tag != "" {
		g.add("tag", c.Tag, "its calls reach the revision with this tag")
	}
	if c.StickyKey != "" {
		g.add("sticky_key", c.StickyKey, "its calls carry this client key: split sticky per client")
	}
	if c.Count != 0 {
		g.add("count", c.Count, "RunTask: tasks per call")
	}
	if c.LaunchType != "" {
		g.add("launch_type", c.LaunchType)
	}
	if c.CapacityProvider != "" {
		g.add("capacity_provider", c.CapacityProvider)
	}
}
