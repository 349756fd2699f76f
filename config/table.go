package config

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// WriteTable prints the effective policy of c as aligned text: every
// service with its wire identity, route, autoscale settings and
// categories, then the overrides.
func (c *Config) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, s := range c.Quota.Services() {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "service %s\n", s.Name)
		if s.TargetPrefix != "" {
			fmt.Fprintf(tw, "  target prefix: %s (SigV4 service %s)\n", s.TargetPrefix, s.SigningName)
		}
		if r := s.Route; r != nil {
			fmt.Fprintf(tw, "  route: host %s, path prefix %s, strip prefix %v\n", orAny(r.Host), orAny(r.PathPrefix), r.StripPrefix)
		}
		if a := c.Autoscale[s.Name]; a != nil {
			e := a.Engine.WithDefaults()
			runs := fmt.Sprintf("%q in %s", append(slices.Clone(a.Command), a.Args...), a.WorkingDir)
			if k := a.Kubernetes; k != nil {
				port := "its only port"
				if k.Port != 0 {
					port = "port " + strconv.Itoa(k.Port)
				}
				ns := k.Namespace
				if ns == "" {
					ns = "(tollgate's namespace)"
				}
				runs = fmt.Sprintf("Kubernetes Deployment %s/%s, Service %s, %s", ns, k.Deployment, k.Service, port)
			}
			cpus := "CPUs"
			if e.CPUsPerInstance == 1 {
				cpus = "CPU"
			}
			fmt.Fprintf(tw, "  autoscaled: %s; %d–%d instances, max concurrency %d, %g %s per instance, targets CPU %g concurrency %g, idle timeout %v\n",
				runs, e.MinInstances, e.MaxInstances, e.MaxConcurrency,
				e.CPUsPerInstance, cpus, e.CPUTarget, e.ConcurrencyTarget, e.IdleTimeout)
			fmt.Fprintf(tw, "  limits: request timeout %v (pending wait included), max pending %d, readiness timeout %v, termination grace %v, rollout timeout %v (traffic stays where it was if no instance of a new revision is ready by then)\n",
				orDuration(a.RequestTimeout, DefaultRequestTimeout), orInt(a.MaxPending, DefaultMaxPending),
				orDuration(a.Readiness.Timeout, DefaultReadinessTimeout), orDuration(a.StopGrace, DefaultStopGrace),
				orDuration(a.RolloutTimeout, DefaultRolloutTimeout))
			if l := a.Liveness; l != nil {
				fmt.Fprintf(tw, "  liveness: GET %s every %v (first %v after ready), timeout %v, unhealthy after %d failures in a row: replaced, over max instances if need be, and stopped once its requests finish (at most the request timeout or %v)\n",
					l.Path, l.Period, l.InitialDelay+l.Period, l.Timeout, l.FailureThreshold, MaxOverMaxGrace)
			}
			fmt.Fprintf(tw, "  pending wait: max(%v, %g × expected cold start), then 429 at max instances; initial cold start %v (until one is measured)\n",
				autoscale.MinPendingWait, autoscale.PendingColdStartFactor, e.InitialColdStart)
			if a.Kubernetes == nil && (a.Engine.CPUsPerInstance != 0 || a.Memory != 0) {
				mem := "unlimited"
				if a.Memory > 0 {
					mem = strconv.FormatInt(a.Memory, 10) + " bytes"
				}
				fmt.Fprintf(tw, "  instance limits (cgroup v2 or v1 where tollgate can): %g %s, memory %s\n", e.CPUsPerInstance, cpus, mem)
			}
			fmt.Fprintf(tw, "  traffic: %s; %s\n", trafficText(a.Traffic), a.Sticky.text())
		}
		if len(s.Categories) == 0 {
			continue
		}
		if s.Source != "" {
			fmt.Fprintf(tw, "  source: %s\n", s.Source)
		}
		fmt.Fprintf(tw, "  throttled: HTTP %d %s %q\n", s.Throttle.HTTPStatus, s.Throttle.Code, s.Throttle.Message)
		if len(s.ThrottleCodes) > 0 {
			fmt.Fprintf(tw, "  also logged as: %s\n", strings.Join(s.ThrottleCodes, ", "))
		}
		if s.DefaultCategory != "" {
			fmt.Fprintf(tw, "  operations not listed: %s (with an upstream)\n", s.DefaultCategory)
		}
		if aliases := s.Aliases(); len(aliases) > 0 {
			for _, a := range slices.Sorted(maps.Keys(aliases)) {
				fmt.Fprintf(tw, "  alias: %s = %s\n", a, aliases[a])
			}
		}
		if s.Upstream != "" {
			fmt.Fprintf(tw, "  upstream: %s\n", s.Upstream)
		}
		fmt.Fprintln(tw, "  CATEGORY\tCAPACITY\tREFILL/S\tACTIONS")
		for _, cat := range s.Categories {
			actions := strings.Join(cat.Actions, " ")
			if len(cat.Actions) == 0 && cat.DrawnBy != "" {
				actions = "(" + cat.DrawnBy + ")"
			}
			if cat.PerAction {
				actions += " [each action its own bucket]"
			}
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\n", cat.Name, cat.Limit.Capacity(),
				strconv.FormatFloat(cat.Limit.RefillPerSecond(), 'f', -1, 64), actions)
		}
		for _, cat := range s.Categories {
			if cat.Source != "" {
				fmt.Fprintf(tw, "  %s: %s\n", cat.Name, cat.Source)
			}
		}
		for _, cat := range s.Categories {
			if t := cat.Throttle; t != nil {
				fmt.Fprintf(tw, "  %s throttled: HTTP %d %s %q\n", cat.Name, t.HTTPStatus, t.Code, t.Message)
			}
		}
	}
	if len(c.Quota.Overrides()) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "overrides")
		fmt.Fprintln(tw, "  SERVICE\tACCOUNT\tREGION\tCATEGORY\tCAPACITY\tREFILL/S")
		for _, o := range c.Quota.Overrides() {
			region := o.Region
			if region == "" {
				region = "*"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\n", o.Service, o.Account, region, o.Category,
				o.Limit.Capacity(), strconv.FormatFloat(o.Limit.RefillPerSecond(), 'f', -1, 64))
		}
	}
	if n := c.Quota.AccessKeys(); n > 0 {
		fmt.Fprintf(tw, "\n%d access keys mapped to accounts\n", n)
	}
	fmt.Fprintf(tw, "\n%s\n", regionsLine(c.Quota.Regions()))
	return tw.Flush()
}

func orAny(s string) string {
	if s == "" {
		return "any"
	}
	return s
}

func orDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func orInt(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// trafficText is a traffic block in a line: "100 % to the latest ready
// revision" without one.
func trafficText(t []TrafficTarget) string {
	if len(t) == 0 {
		return "100 % to the latest ready revision"
	}
	parts := make([]string, 0, len(t))
	for _, e := range t {
		to := e.Revision
		if e.LatestRevision {
			to = "the latest ready revision"
		}
		part := fmt.Sprintf("%d %% to %s", e.Percent, to)
		var notes []string
		if e.Deployment != "" {
			notes = append(notes, "deployment "+e.Deployment)
		}
		if e.Tag != "" {
			notes = append(notes, "tag "+e.Tag)
		}
		if len(notes) > 0 {
			part += " (" + strings.Join(notes, ", ") + ")"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}
