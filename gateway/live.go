package gateway

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/memory"
	redisstore "github.com/tollgate/tollgate/limiter/redis"
	"github.com/tollgate/tollgate/liveview"
	"github.com/tollgate/tollgate/quota"
)

// This file serves the live view: the JSON endpoints under
// /v1/admin/live/ (backed by Options.Live) and the page at /ui/ that draws
// them. The page's files hold no data, so they are served without the
// token, but only while admin is enabled; everything they show comes from
// the token-guarded endpoints.

// noteThrottled records a decision's bucket for the hottest buckets view
// (throttled) and the utilisation view (allowed: the tokens in use after
// it).
func (g *Gateway) noteThrottled(k quota.Key, d bucket.Decision, err error) {
	if err != nil || g.live == nil {
		return
	}
	if !d.Allowed {
		g.live.Throttled(k)
		return
	}
	c := d.Limit.Capacity()
	g.live.Used(k, c-d.Remaining, c)
}

// adminEndpoint is one entry of GET /v1/admin/.
type adminEndpoint struct {
	Path string `json:"path"`
	Help string `json:"help"`
}

var adminEndpoints = []adminEndpoint{
	{"GET /v1/admin/bucket?service=&account=&region=&action=|category=", "a bucket's state, without taking a token"},
	{"POST /v1/admin/reload", "reload the config file and the rls directory; a bad file keeps its old state; answers the parts reloaded"},
	{"GET /v1/admin/live/decisions?since=UNIX_MS", "decisions per second per service and category (allowed, throttled, errors), last 10 minutes, newer than since"},
	{"GET /v1/admin/live/hot?n=10", "the buckets throttled most over the last minute, with their current tokens"},
	{"GET /v1/admin/live/usage?n=20&account=", "per bucket over the last hour: throttled decisions and the peak of tokens in use, most throttled then most used first"},
	{"GET /v1/admin/live/store", "the bucket store: memory or Redis, reachable or not, decisions by source"},
	{"GET /v1/admin/live/autoscaled?since=UNIX_MS", "each autoscaled service per second: instances by state, recommended count, pending, 429s; its driver and last scale decisions"},
	{"GET /ui/", "the live page drawing these endpoints (asks for the admin token)"},
}

func (g *Gateway) handleLive(handle func(pattern, name string, h http.HandlerFunc)) {
	handle("GET /v1/admin/{$}", "admin_index", g.admin(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, struct {
			Endpoints []adminEndpoint `json:"endpoints"`
		}{append(slices.Clip(adminEndpoints), g.adminMore...)})
	}))
	handle("GET /v1/admin/live/decisions", "admin_live_decisions", g.admin(g.serveLiveDecisions))
	handle("GET /v1/admin/live/hot", "admin_live_hot", g.admin(g.serveLiveHot))
	handle("GET /v1/admin/live/usage", "admin_live_usage", g.admin(g.serveLiveUsage))
	handle("GET /v1/admin/live/store", "admin_live_store", g.admin(g.serveLiveStore))
	handle("GET /v1/admin/live/autoscaled", "admin_live_autoscaled", g.admin(g.serveLiveAutoscaled))
	files := http.StripPrefix("/ui/", http.FileServerFS(liveview.Files()))
	handle("GET /ui/", "ui", func(w http.ResponseWriter, r *http.Request) {
		if !g.adminOn {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		// Nothing but this server: no other host, no inline script.
		h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// liveOff answers the live endpoints of a gateway without a recorder.
func (g *Gateway) liveOff(w http.ResponseWriter) bool {
	if g.live == nil {
		writeNativeError(w, http.StatusNotFound, "", "the live view is off: this gateway has no recorder (gateway.Options.Live)")
		return true
	}
	return false
}

// liveDecisions is the answer to GET /v1/admin/live/decisions, in
// columns: point i of each series covers the durations_ms[i] milliseconds
// up to times_ms[i] (Unix milliseconds).
type liveDecisions struct {
	TimesMs     []int64      `json:"times_ms"`
	DurationsMs []int64      `json:"durations_ms"`
	Series      []liveSeries `json:"series"`
}

type liveSeries struct {
	Service   string   `json:"service"`
	Category  string   `json:"category"`
	Allowed   []uint64 `json:"allowed"`
	Throttled []uint64 `json:"throttled"`
	Errors    []uint64 `json:"errors"`
}

func (g *Gateway) serveLiveDecisions(w http.ResponseWriter, r *http.Request) {
	if g.liveOff(w) {
		return
	}
	since, ok := parseSince(w, r)
	if !ok {
		return
	}
	d := g.live.Decisions(since)
	out := liveDecisions{TimesMs: make([]int64, len(d.Times)), DurationsMs: make([]int64, len(d.Times)), Series: []liveSeries{}}
	for i, t := range d.Times {
		out.TimesMs[i] = t.UnixMilli()
		out.DurationsMs[i] = d.Durations[i].Milliseconds()
	}
	for _, s := range d.Series {
		out.Series = append(out.Series, liveSeries{s.Service, s.Category, s.Allowed, s.Throttled, s.Errors})
	}
	writeJSON(w, http.StatusOK, out)
}

// liveHot is the answer to GET /v1/admin/live/hot.
type liveHot struct {
	WindowSeconds float64     `json:"window_seconds"`
	Buckets       []hotBucket `json:"buckets"`
	// Dropped counts the window's throttles the recorder could not count
	// (its buffers were full); each bucket's throttled and error_bound
	// include them, since any bucket may have had them.
	Dropped    uint64 `json:"dropped"`
	StoreError string `json:"store_error,omitempty"`
}

type hotBucket struct {
	Key                string  `json:"key"`
	Service            string  `json:"service"`
	Account            string  `json:"account"`
	AccountID          string  `json:"account_id"` // the 12-digit id AWS answers show
	Region             string  `json:"region"`
	Category           string  `json:"category"`
	Throttled          uint64  `json:"throttled"`
	ErrorBound         uint64  `json:"error_bound"`
	ThrottlesPerSecond float64 `json:"throttles_per_second"`
	Tokens             *int64  `json:"tokens"` // null when the store could not say
	Capacity           int64   `json:"capacity"`
}

// maxHot bounds n of GET /v1/admin/live/hot.
const maxHot = 100

func (g *Gateway) serveLiveHot(w http.ResponseWriter, r *http.Request) {
	if g.liveOff(w) {
		return
	}
	n := 10
	if s := r.URL.Query().Get("n"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > maxHot {
			writeNativeError(w, http.StatusBadRequest, "n", "n: want a whole number from 1 to "+strconv.Itoa(maxHot)+", got "+strconv.Quote(s))
			return
		}
		n = v
	}
	keys, window, dropped := g.live.Hot(n)
	cfg := g.policy.Load().cfg
	out := liveHot{WindowSeconds: round3(window.Seconds()), Buckets: make([]hotBucket, 0, len(keys)), Dropped: dropped}
	var reqs []limiter.Request
	var at []int // out index of each request
	for _, h := range keys {
		b := hotBucket{Key: h.Key.String(), Service: h.Key.Service, Account: h.Key.Account, AccountID: awsjson.AccountID(h.Key.Account), Region: h.Key.Region,
			Category: h.Key.Category, Throttled: h.Throttled, ErrorBound: h.ErrorBound, ThrottlesPerSecond: round3(h.PerSecond)}
		if limit, ok := g.limitOf(cfg, h.Key); ok { // else the key's category left the config
			b.Capacity = limit.Capacity()
			reqs = append(reqs, limiter.Request{Key: b.Key, Limit: limit, Tokens: 0})
			at = append(at, len(out.Buckets))
		}
		out.Buckets = append(out.Buckets, b)
	}
	if len(reqs) > 0 {
		ds := make([]bucket.Decision, len(reqs))
		if err := g.limiter.TakeBatch(r.Context(), reqs, ds); err != nil {
			out.StoreError = err.Error()
		} else {
			for j, i := range at {
				tokens := ds[j].Remaining
				out.Buckets[i].Tokens = &tokens
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// liveStore is the answer to GET /v1/admin/live/store.
type liveStore struct {
	Kind  string `json:"kind"`  // memory, redis, or the limiter's Go type
	State string `json:"state"` // ok, or unreachable
	Error string `json:"error,omitempty"`
	// Buckets is how many buckets a memory store holds.
	Buckets *int `json:"buckets,omitempty"`
	// FailurePolicy is how a Redis store decides while Redis cannot
	// answer: local (each node from its own bucket), open (allow) or
	// closed (deny).
	FailurePolicy string `json:"failure_policy,omitempty"`
	// Decisions counts a Redis store's decisions since start by who made
	// them: redis, deny_cache, failure_policy.
	Decisions map[string]uint64 `json:"decisions,omitempty"`
	// Errors counts failed calls to Redis since start.
	Errors *uint64 `json:"errors,omitempty"`
}

// storePingTimeout bounds the Redis ping of GET /v1/admin/live/store.
const storePingTimeout = 500 * time.Millisecond

func (g *Gateway) serveLiveStore(w http.ResponseWriter, r *http.Request) {
	out := liveStore{State: "ok"}
	switch s := g.limiter.(type) {
	case *memory.Store:
		out.Kind = "memory"
		n := s.Len()
		out.Buckets = &n
	case *redisstore.Store:
		out.Kind = "redis"
		ctx, cancel := context.WithTimeout(r.Context(), storePingTimeout)
		if err := s.Ping(ctx); err != nil {
			out.State, out.Error = "unreachable", err.Error()
		}
		cancel()
		switch s.FailurePolicy() {
		case redisstore.FailClosed:
			out.FailurePolicy = "closed"
		case redisstore.FailOpen:
			out.FailurePolicy = "open"
		default:
			out.FailurePolicy = "local"
		}
		st := s.Stats()
		out.Decisions = map[string]uint64{"redis": st.Redis, "deny_cache": st.Cached, "failure_policy": st.Fallback}
		out.Errors = &st.Errors
	default:
		out.Kind = fmt.Sprintf("%T", g.limiter)
	}
	writeJSON(w, http.StatusOK, out)
}

// round3 rounds to three decimals, for answers people read.
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// parseSince reads the since parameter (Unix milliseconds; zero time when
// absent), answering 400 when it is bad.
func parseSince(w http.ResponseWriter, r *http.Request) (time.Time, bool) {
	s := r.URL.Query().Get("since")
	if s == "" {
		return time.Time{}, true
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms < 0 {
		writeNativeError(w, http.StatusBadRequest, "since", "since: want Unix milliseconds, got "+strconv.Quote(s))
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// liveAutoscaled is the answer to GET /v1/admin/live/autoscaled, in
// columns like liveDecisions.
type liveAutoscaled struct {
	TimesMs     []int64       `json:"times_ms"`
	DurationsMs []int64       `json:"durations_ms"`
	Services    []liveService `json:"services"`
}

type liveService struct {
	Name        string           `json:"name"`
	Instances   map[string][]int `json:"instances"` // by state
	Recommended []int            `json:"recommended"`
	Pending     []int            `json:"pending"`
	Rejected    []uint64         `json:"rejected"` // 429s of each point
	Driver      string           `json:"driver"`
	Scales      []liveScale      `json:"scale_decisions"`
	// Revisions has the instances per revision, by name.
	Revisions []liveRevision `json:"revisions"`
}

// liveRevision is one revision's instances of each point, with the
// newest share of traffic and tags it was seen with.
type liveRevision struct {
	Name      string   `json:"name"`
	Percent   int      `json:"percent"`
	Tags      []string `json:"tags"`
	Instances []int    `json:"instances"`
}

type liveScale struct {
	TimeMs int64  `json:"time_ms"`
	From   int    `json:"from"`
	To     int    `json:"to"`
	Driver string `json:"driver"`
	Reason string `json:"reason"`
}

func (g *Gateway) serveLiveAutoscaled(w http.ResponseWriter, r *http.Request) {
	if g.liveOff(w) {
		return
	}
	since, ok := parseSince(w, r)
	if !ok {
		return
	}
	sv := g.live.Services(since)
	out := liveAutoscaled{TimesMs: make([]int64, len(sv.Times)), DurationsMs: make([]int64, len(sv.Times)), Services: []liveService{}}
	for i, t := range sv.Times {
		out.TimesMs[i] = t.UnixMilli()
		out.DurationsMs[i] = sv.Durations[i].Milliseconds()
	}
	for _, s := range sv.Services {
		ls := liveService{Name: s.Name, Instances: s.Instances, Recommended: s.Recommended, Pending: s.Pending,
			Rejected: s.Rejected, Driver: s.Driver, Scales: []liveScale{}}
		for _, d := range s.Scales {
			ls.Scales = append(ls.Scales, liveScale{d.Time.UnixMilli(), d.From, d.To, d.Driver, d.Reason})
		}
		ls.Revisions = make([]liveRevision, 0, len(s.Revisions))
		for _, rv := range s.Revisions {
			ls.Revisions = append(ls.Revisions, liveRevision{Name: rv.Name, Percent: rv.Percent,
				Tags: append([]string{}, rv.Tags...), Instances: rv.Instances})
		}
		out.Services = append(out.Services, ls)
	}
	writeJSON(w, http.StatusOK, out)
}

// liveUsage is the answer to GET /v1/admin/live/usage.
type liveUsage struct {
	WindowSeconds float64 `json:"window_seconds"`
	// PeakFloor is the most a bucket may have been used in a minute that
	// does not list it: a peak above it is exact.
	PeakFloor float64       `json:"peak_floor"`
	Dropped   uint64        `json:"dropped"`
	Buckets   []usageBucket `json:"buckets"`
}

type usageBucket struct {
	Key        string  `json:"key"`
	Service    string  `json:"service"`
	Account    string  `json:"account"`
	AccountID  string  `json:"account_id"` // the 12-digit id AWS answers show
	Region     string  `json:"region"`
	Category   string  `json:"category"`
	Throttled  uint64  `json:"throttled"`
	ErrorBound uint64  `json:"error_bound"`
	PeakUsed   int64   `json:"peak_used"`
	PeakOf     int64   `json:"peak_capacity"` // the capacity when it peaked
	Peak       float64 `json:"peak"`          // peak_used / peak_capacity
	// Capacity and RatePerSecond are the bucket's limit now (an approved
	// increase included); 0 when its category left the config.
	Capacity      int64   `json:"capacity"`
	RatePerSecond float64 `json:"rate_per_second"`
}

// maxUsage bounds n of GET /v1/admin/live/usage.
const maxUsage = 500

func (g *Gateway) serveLiveUsage(w http.ResponseWriter, r *http.Request) {
	if g.liveOff(w) {
		return
	}
	q := r.URL.Query()
	n := 20
	if s := q.Get("n"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > maxUsage {
			writeNativeError(w, http.StatusBadRequest, "n", "n: want a whole number from 1 to "+strconv.Itoa(maxUsage)+", got "+strconv.Quote(s))
			return
		}
		n = v
	}
	var match func(quota.Key) bool
	if a := q.Get("account"); a != "" {
		a = g.names.account(a) // the access key or its 12-digit id
		match = func(k quota.Key) bool { return k.Account == a }
	}
	v := g.live.Usage(n, match)
	cfg := g.policy.Load().cfg
	out := liveUsage{WindowSeconds: round3(v.Window.Seconds()), PeakFloor: v.PeakFloor, Dropped: v.Dropped, Buckets: make([]usageBucket, 0, len(v.Keys))}
	for _, u := range v.Keys {
		b := usageBucket{Key: u.Key.String(), Service: u.Key.Service, Account: u.Key.Account, AccountID: awsjson.AccountID(u.Key.Account), Region: u.Key.Region, Category: u.Key.Category,
			Throttled: u.Throttled, ErrorBound: u.ErrorBound, PeakUsed: u.PeakUsed, PeakOf: u.Capacity, Peak: round3(u.Peak)}
		if limit, ok := g.limitOf(cfg, u.Key); ok {
			b.Capacity, b.RatePerSecond = limit.Capacity(), limit.RefillPerSecond()
		}
		out.Buckets = append(out.Buckets, b)
	}
	writeJSON(w, http.StatusOK, out)
}
