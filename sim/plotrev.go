package sim

// This file draws the panels of a run's revisions (instances, share and
// requests of each) and of the buckets a call takes from together
// (RunTask on Fargate).

import (
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/quota"
)

// revisionMarks are the instants a run's revisions and traffic change:
// each deployment after the start, each traffic change made, and each
// move of the split.
func revisionMarks(r *Result) []mark {
	end := r.Scenario.Duration.Seconds()
	var ms []mark
	for _, rv := range r.Revisions {
		if at := rv.DeployedAt.Seconds(); at > 0 && at < end {
			ms = append(ms, mark{at, "new " + rv.Name})
		}
	}
	for _, c := range r.Scenario.Backend.TrafficChanges {
		if at := c.At.Seconds(); at > 0 && at < end {
			ms = append(ms, mark{at, "traffic → " + percentsString(c.Traffic)})
		}
	}
	return ms
}

// percentsString is a traffic block's percents, "90/10".
func percentsString(t []TrafficTarget) string {
	parts := make([]string, 0, len(t))
	for _, e := range blockOf(t) {
		parts = append(parts, strconv.Itoa(e.Percent))
	}
	return strings.Join(parts, "/")
}

// revisionPanels are the panels of r's revisions: the instances of each
// (with those over max instances), its share of the untagged requests,
// and the calls routed to it; none without revisions.
func revisionPanels(r *Result) []panel {
	if len(r.Revisions) == 0 {
		return nil
	}
	marks := append(loadMarks(r), revisionMarks(r)...)
	n := len(r.Seconds)
	perRev := func(f func(rv RevisionSeries, k int) float64) []series {
		var out []series
		for _, rv := range r.Revisions {
			ys := make([]float64, n)
			for k := range ys {
				ys[k] = f(rv, k)
			}
			out = append(out, series{name: rv.Name, ys: ys})
		}
		return out
	}
	inst := perRev(func(rv RevisionSeries, k int) float64 {
		return float64(rv.Starting[k] + rv.Ready[k] + rv.Draining[k])
	})
	inst = append(inst, series{name: "over max", ys: column(r, func(s Second) float64 { return float64(s.OverMax) })})
	level := maxInstancesLevel(r)
	return []panel{
		{title: "instances per revision (starting, ready or draining)", ylabel: "instances", counts: true, marks: marks, level: level, lines: inst},
		{title: "share of the untagged requests per revision (traffic split)", ylabel: "percent", counts: true, marks: marks,
			lines: perRev(func(rv RevisionSeries, k int) float64 { return float64(rv.Percent[k]) })},
		{title: "calls routed to each revision per second (tagged calls included)", ylabel: "calls/s", counts: true, marks: marks,
			lines: perRev(func(rv RevisionSeries, k int) float64 { return float64(rv.Requests[k]) })},
	}
}

// bucketPanels are the panels of the buckets r's calls take from
// together: the tokens each holds, and the calls each refused; none when
// no call takes from several.
func bucketPanels(r *Result) []panel {
	if len(r.Buckets) == 0 {
		return nil
	}
	var tokens, refused []series
	for _, b := range r.Buckets {
		ys := make([]float64, len(b.Tokens))
		ts := make([]float64, len(b.Throttled))
		for k := range ys {
			ys[k] = float64(b.Tokens[k])
			ts[k] = float64(b.Throttled[k])
		}
		name := bucketLabel(b.Category)
		tokens = append(tokens, series{name: name + " " + b.Limit.String(), ys: ys})
		refused = append(refused, series{name: name, ys: ts})
	}
	marks := loadMarks(r)
	return []panel{
		{title: "tokens in each bucket at the end of each second (ECS modify: cluster-resource-modify; limits burst/refill)", ylabel: "tokens", counts: true, marks: marks, lines: tokens},
		{title: "calls throttled per second, by the bucket that was short (a call takes from every bucket, or none)", ylabel: "calls/s", counts: true, marks: marks, lines: refused},
	}
}

// bucketLabel is a short legend name for a bucket's category: the
// Fargate buckets and ECS's cluster-resource-modify by what they count.
func bucketLabel(category string) string {
	switch category {
	case "cluster-resource-modify":
		return "ECS modify"
	case quota.FargateRunTask:
		return "Fargate calls"
	case quota.FargateOnDemandTasks:
		return "Fargate tasks"
	case quota.FargateSpotTasks:
		return "Spot tasks"
	}
	return category
}
