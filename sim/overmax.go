package sim

// This file is the end of a replaced revision: it drains by its requests
// in flight, its instances counted over max instances (the pool's
// tollgate_pool_instances_over_max), until they are done or its grace
// (the request timeout, at most 15 minutes) is over, when the calls still
// on it are cut off; and the per-revision series a run records.

import "time"

// RevisionSeries is one revision's time series, one entry per second.
type RevisionSeries struct {
	// Name is the revision's name, such as hello-00002.
	Name string
	// DeployedAt is when it was deployed; ReadyAt when it became the
	// latest ready revision (latest_revision follows it), -1 if never.
	DeployedAt, ReadyAt time.Duration
	// RetiredAt is when it was left without traffic or tag, and began to
	// drain; StoppedAt when its last instance went. -1 if never.
	RetiredAt, StoppedAt time.Duration
	// Starting, Ready and Draining count its instances at the end of each
	// second.
	Starting, Ready, Draining []int
	// Percent is its share of the untagged requests at the end of each
	// second.
	Percent []int
	// Requests are the calls routed to it in each second, tagged ones
	// included.
	Requests []int
	// OverMax are its instances beyond the latest revision's max
	// instances at the end of each second: a replaced revision's,
	// finishing its requests.
	OverMax []int
}

// tick checks the pending changes' timeouts and stops the retired
// revisions that have drained, or whose grace has passed.
func (s *svcState) tick(r *runner) {
	r.check()
	for _, rv := range r.revs {
		if !rv.retired || rv.stopped {
			continue
		}
		st := rv.eng.Stats()
		if st.InFlight+st.Pending > 0 && r.now < rv.retireBy {
			continue
		}
		r.stopRevision(rv)
	}
}

// stopRevision stops a retired revision's instances: the calls still on
// it are cut off (the server answers 504) and fail.
func (r *runner) stopRevision(rv *backendRev) {
	var cut []int32
	for ci := range r.calls {
		c := &r.calls[ci]
		if c.rev == rv.idx && c.live {
			cut = append(cut, int32(ci))
		}
	}
	if len(cut) > 0 {
		r.svc.logf(r, rv.idx, 0, 0, "grace over: %d requests cut off", len(cut))
	} else {
		r.svc.logf(r, rv.idx, 0, 0, "drained: its instances stop")
	}
	for _, ci := range cut {
		r.calls[ci].epoch++ // its completion, if queued, is void
		r.giveUp(ci)
	}
	clear(rv.pending)
	rv.insts = nil
	rv.stopped = true
	rv.series.StoppedAt = time.Duration(r.now)
}

// closeSecond records second k of each revision: its share, and the
// instances of replaced revisions beyond the latest's max instances,
// counted against the replaced ones, oldest first (the pool's overMax).
func (s *svcState) closeSecond(r *runner, k int) {
	if k >= len(r.secs) {
		return
	}
	shares := r.routedShares()
	total, draining := 0, 0
	for _, rv := range r.revs {
		rv.series.Percent[k] = shares[rv.idx]
		if rv.stopped {
			continue
		}
		n := rv.series.Starting[k] + rv.series.Ready[k] + rv.series.Draining[k]
		total += n
		if rv.retired {
			draining += n
		}
	}
	if draining == 0 {
		return
	}
	over := max(0, total-maxInstancesOf(r.revs[s.latest].cfg))
	for _, rv := range r.revs {
		if !rv.retired || rv.stopped || over == 0 {
			continue
		}
		n := min(over, rv.series.Starting[k]+rv.series.Ready[k]+rv.series.Draining[k])
		rv.series.OverMax[k] = n
		r.secs[k].OverMax += n
		over -= n
	}
}
