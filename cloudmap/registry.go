package cloudmap

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/state/bolt"
)

// TargetPrefix is the X-Amz-Target prefix of the Cloud Map API.
const TargetPrefix = "Route53AutoNaming_v20170314"

// DefaultScope is the account and region of requests that carry no SigV4
// credential.
var DefaultScope = Scope{Account: "000000000000", Region: "us-east-1"}

// Scope names one account and region: each has its own registry.
type Scope struct {
	Account string
	Region  string
}

// key names the scope in the store.
func (s Scope) key() string { return awsjson.AccountID(s.Account) + "/" + s.Region }

// normal is s with its account as accountID gives it.
func (s Scope) normal() Scope {
	s.Account = awsjson.AccountID(s.Account)
	return s
}

// Limits bound what a Registry holds. A zero field takes its default.
//
// Every account and region is bound by AWS's own per-account quotas. An
// account that the operator named (mapped in the gateway's access_keys,
// or used by the autoscaler's registrations, or DefaultScope's) is bound
// by nothing else, so no other caller can take its room. Accounts of
// access keys nobody named can be made up at will, so they share one
// bounded budget of memory, of which each may hold a part in all its
// regions together (UnknownAccountBytes): one key cannot fill it, however
// many regions it signs for, and refuse the next.
type Limits struct {
	// Namespaces per scope; default 50 (AWS: "Namespaces per Region").
	Namespaces int
	// Services per scope; default 10,000.
	Services int
	// InstancesPerService; default 1,000 (AWS: "Instances per service").
	InstancesPerService int
	// InstancesPerNamespace; default 2,000 (AWS: "Instances per namespace").
	InstancesPerNamespace int
	// Attributes per instance; default 30 (AWS: "Custom attributes per
	// instance"), plus the AWS_ reserved ones.
	Attributes int
	// Operations remembered per scope for GetOperation and
	// ListOperations, oldest forgotten first; default 1,000. They count
	// in an unknown account's share of UnknownBytes.
	Operations int
	// UnknownBytes is the memory, estimated, that all scopes of accounts
	// nobody named share; default 64 MiB. Beyond it their creations get
	// ResourceLimitExceeded; named accounts are not affected. With
	// Options.Redis it is one budget, kept in Redis, for every node that
	// shares it (give them all the same Limits).
	UnknownBytes int64
	// UnknownAccountBytes is what one such account may hold of it, all
	// its regions together; default 4 MiB.
	UnknownAccountBytes int64
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.Namespaces, 50)
	def(&l.Services, 10000)
	def(&l.InstancesPerService, 1000)
	def(&l.InstancesPerNamespace, 2000)
	def(&l.Attributes, 30)
	def(&l.Operations, 1000)
	if l.UnknownBytes <= 0 {
		l.UnknownBytes = 64 << 20
	}
	if l.UnknownAccountBytes <= 0 {
		l.UnknownAccountBytes = 4 << 20
	}
	return l
}

// Options configure a Registry. The zero value is an in-memory registry on
// the system clock.
type Options struct {
	// Now tells the time (creation dates, operation progress); nil means
	// time.Now.
	Now func() time.Time
	// Rand is the source of the random part of ids; nil means crypto/rand.
	Rand io.Reader
	// OperationDelay is how long an operation stays SUBMITTED before
	// GetOperation reports SUCCESS; 0 means SUCCESS at once.
	OperationDelay time.Duration
	// Redis, when set, holds the state so that several nodes share it;
	// nil means memory.
	Redis goredis.UniversalClient
	// Durable, when set and Redis is not, keeps the state in this
	// embedded store: New loads it, and every change is on disk before
	// its answer. nil means memory alone.
	Durable *bolt.DB
	// CacheBytes bounds the scopes, estimated as Limits.UnknownBytes
	// estimates them, that a Durable registry keeps in memory: each is
	// read from the file when first used, and the least recently used
	// whose changes are all on disk are dropped beyond it. 0 means
	// DefaultCacheBytes.
	CacheBytes int64
	// RedisPrefix starts every Redis key; empty means "tollgate:cloudmap:".
	RedisPrefix string
	// RedisCacheBytes bounds the state, estimated as Limits.UnknownBytes
	// estimates it, that a node keeps of what it read from Redis: the
	// accounts least recently used are forgotten first and read again
	// when asked for. 0 means 128 MiB.
	RedisCacheBytes int64
	// Limits bound what the registry holds.
	Limits Limits
	// StoreTimeout bounds each Redis call; 0 means 1 s. When it passes,
	// a write fails with ServiceUnavailable (HTTP 503, which AWS SDKs
	// retry) and DiscoverInstances answers from the state this node last
	// read (see MaxStale).
	StoreTimeout time.Duration
	// MaxStale is how old the last state read from Redis may be for
	// DiscoverInstances and DiscoverInstancesRevision to answer from it
	// while Redis does not; 0 means 5 minutes, negative never.
	MaxStale time.Duration
	// Logger receives store failures; nil discards them.
	Logger *slog.Logger
	// MaxBodyBytes bounds request bodies; 0 means 1 MiB.
	MaxBodyBytes int64
}

// Registry is a Cloud Map registry. It is an http.Handler and safe for
// concurrent use.
type Registry struct {
	now     func() time.Time
	rand    io.Reader
	delay   time.Duration
	store   store
	lim     Limits
	log     *slog.Logger
	maxBody int64
	known   sync.Map   // scope key -> true: accounts named by the operator
	randMu  sync.Mutex // guards rand, which need not be safe for concurrent use
}

// New returns a registry; it starts nothing. It fails when
// OperationDelay, MaxBodyBytes, StoreTimeout, RedisCacheBytes or
// CacheBytes is negative, or when the Durable store's records cannot be read.
func New(opts Options) (*Registry, error) {
	if opts.OperationDelay < 0 || opts.MaxBodyBytes < 0 || opts.StoreTimeout < 0 || opts.RedisCacheBytes < 0 || opts.CacheBytes < 0 {
		return nil, errors.New("cloudmap: OperationDelay, MaxBodyBytes, StoreTimeout, RedisCacheBytes and CacheBytes must not be negative")
	}
	r := &Registry{now: opts.Now, rand: opts.Rand, delay: opts.OperationDelay,
		lim: opts.Limits.withDefaults(), log: opts.Logger, maxBody: opts.MaxBodyBytes}
	if r.now == nil {
		r.now = time.Now
	}
	if r.rand == nil {
		r.rand = rand.Reader
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.maxBody == 0 {
		r.maxBody = 1 << 20
	}
	if opts.Redis != nil {
		p := opts.RedisPrefix
		if p == "" {
			p = "tollgate:cloudmap:"
		}
		timeout, maxStale := opts.StoreTimeout, opts.MaxStale
		if timeout == 0 {
			timeout = time.Second
		}
		if maxStale == 0 {
			maxStale = 5 * time.Minute
		}
		cacheBytes := opts.RedisCacheBytes
		if cacheBytes == 0 {
			cacheBytes = 128 << 20
		}
		r.store = newRedisStore(redisConfig{client: opts.Redis, prefix: p, timeout: timeout, maxStale: maxStale, now: r.now,
			budget: budget{max: r.lim.UnknownBytes, perAccount: r.lim.UnknownAccountBytes}, cacheBytes: cacheBytes})
	} else if opts.Durable != nil {
		b, err := newBoltStore(r.lim, opts.Durable, opts.CacheBytes)
		if err != nil {
			return nil, err
		}
		r.store = b
	} else {
		r.store = newMemStore(r.lim)
	}
	r.known.Store(DefaultScope.key(), true)
	return r, nil
}

// handler runs one operation: it decodes the body, works in scope and
// returns the response document.
type handler func(r *Registry, ctx context.Context, sc Scope, body []byte) (any, error)

// operations maps each operation to its handler and the error codes the
// model declares for it (botocore servicediscovery/2017-03-14
// service-2.json, as aws-sdk-go-v2 service/servicediscovery v1.40.2
// decodes them).
var operations = map[string]struct {
	h     handler
	codes []string
}{
	"CreateHttpNamespace":              {(*Registry).createHTTPNamespace, []string{codeDuplicateRequest, codeInvalidInput, codeNamespaceAlreadyExists, codeResourceLimitExceeded, codeTooManyTags}},
	"CreatePrivateDnsNamespace":        {(*Registry).createPrivateDNSNamespace, []string{codeDuplicateRequest, codeInvalidInput, codeNamespaceAlreadyExists, codeResourceLimitExceeded, codeTooManyTags}},
	"CreatePublicDnsNamespace":         {(*Registry).createPublicDNSNamespace, []string{codeDuplicateRequest, codeInvalidInput, codeNamespaceAlreadyExists, codeResourceLimitExceeded, codeTooManyTags}},
	"ListNamespaces":                   {(*Registry).listNamespaces, []string{codeInvalidInput}},
	"GetNamespace":                     {(*Registry).getNamespace, []string{codeInvalidInput, codeNamespaceNotFound}},
	"DeleteNamespace":                  {(*Registry).deleteNamespace, []string{codeDuplicateRequest, codeInvalidInput, codeNamespaceNotFound, codeResourceInUse}},
	"UpdateHttpNamespace":              {(*Registry).updateHTTPNamespace, []string{codeDuplicateRequest, codeInvalidInput, codeNamespaceNotFound, codeResourceInUse}},
	"UpdatePrivateDnsNamespace":        {(*Registry).updatePrivateDNSNamespace, []string{codeDuplicateRequest, codeInvalidInput, codeNamespaceNotFound, codeResourceInUse}},
	"UpdatePublicDnsNamespace":         {(*Registry).updatePublicDNSNamespace, []string{codeDuplicateRequest, codeInvalidInput, codeNamespaceNotFound, codeResourceInUse}},
	"CreateService":                    {(*Registry).createService, []string{codeInvalidInput, codeNamespaceNotFound, codeResourceLimitExceeded, codeServiceAlreadyExists, codeTooManyTags}},
	"ListServices":                     {(*Registry).listServices, []string{codeInvalidInput}},
	"GetService":                       {(*Registry).getService, []string{codeInvalidInput, codeServiceNotFound}},
	"UpdateService":                    {(*Registry).updateService, []string{codeDuplicateRequest, codeInvalidInput, codeServiceNotFound}},
	"DeleteService":                    {(*Registry).deleteService, []string{codeInvalidInput, codeResourceInUse, codeServiceNotFound}},
	"GetServiceAttributes":             {(*Registry).getServiceAttributes, []string{codeInvalidInput, codeServiceNotFound}},
	"UpdateServiceAttributes":          {(*Registry).updateServiceAttributes, []string{codeInvalidInput, codeServiceNotFound, codeAttributesLimit}},
	"DeleteServiceAttributes":          {(*Registry).deleteServiceAttributes, []string{codeInvalidInput, codeServiceNotFound}},
	"RegisterInstance":                 {(*Registry).registerInstance, []string{codeDuplicateRequest, codeInvalidInput, codeResourceInUse, codeResourceLimitExceeded, codeServiceNotFound}},
	"DeregisterInstance":               {(*Registry).deregisterInstance, []string{codeDuplicateRequest, codeInstanceNotFound, codeInvalidInput, codeResourceInUse, codeServiceNotFound}},
	"GetInstance":                      {(*Registry).getInstance, []string{codeInstanceNotFound, codeInvalidInput, codeServiceNotFound}},
	"ListInstances":                    {(*Registry).listInstances, []string{codeInvalidInput, codeServiceNotFound}},
	"GetInstancesHealthStatus":         {(*Registry).getInstancesHealthStatus, []string{codeInstanceNotFound, codeInvalidInput, codeServiceNotFound}},
	"UpdateInstanceCustomHealthStatus": {(*Registry).updateInstanceCustomHealthStatus, []string{codeCustomHealthNotFound, codeInstanceNotFound, codeInvalidInput, codeServiceNotFound}},
	"DiscoverInstances":                {(*Registry).discoverInstances, []string{codeInvalidInput, codeNamespaceNotFound, codeRequestLimitExceeded, codeServiceNotFound}},
	"DiscoverInstancesRevision":        {(*Registry).discoverInstancesRevision, []string{codeInvalidInput, codeNamespaceNotFound, codeRequestLimitExceeded, codeServiceNotFound}},
	"GetOperation":                     {(*Registry).getOperation, []string{codeInvalidInput, codeOperationNotFound}},
	"ListOperations":                   {(*Registry).listOperations, []string{codeInvalidInput}},
	"ListTagsForResource":              {(*Registry).listTagsForResource, []string{codeInvalidInput, codeResourceNotFound}},
	"TagResource":                      {(*Registry).tagResource, []string{codeInvalidInput, codeResourceNotFound, codeTooManyTags}},
	"UntagResource":                    {(*Registry).untagResource, []string{codeInvalidInput, codeResourceNotFound}},
}

// Operations lists the operations the registry answers, sorted.
func Operations() []string {
	return slices.Sorted(maps.Keys(operations))
}

// ServeHTTP answers one Cloud Map API request. The host does not matter, so
// the SDK's data- prefixed DiscoverInstances host is served too.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, &apiError{Code: "UnknownOperationException", Message: "Cloud Map requests are POSTs"})
		return
	}
	prefix, action, err := awsjson.ParseTarget(req.Header.Get("X-Amz-Target"))
	op, ok := operations[action]
	if err != nil || prefix != TargetPrefix || !ok {
		writeError(w, http.StatusBadRequest, &apiError{Code: "UnknownOperationException",
			Message: "unknown operation " + strconv.Quote(req.Header.Get("X-Amz-Target"))})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, invalid("request body: %v", err))
		return
	}
	sc := r.scopeOf(req)
	resp, err := op.h(r, req.Context(), sc, body)
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			r.log.Error("cloud map registry store failed", "action", action, "error", err)
			// 503 ServiceUnavailable is AWS's common error for this, and
			// every AWS SDK retries it.
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, &apiError{Code: "ServiceUnavailable", Message: "registry store unavailable; retry"})
			return
		}
		if !knows(op.codes, ae.Code) {
			// A code the SDK does not know for this operation would turn
			// into a generic error; this is a bug in the registry.
			r.log.Error("cloud map registry answered with an undeclared code", "action", action, "code", ae.Code)
		}
		writeError(w, ae.status(), ae)
		return
	}
	b, err := json.Marshal(resp)
	if err != nil {
		writeError(w, http.StatusInternalServerError, &apiError{Code: "InternalFailure", Message: err.Error()})
		return
	}
	awsjson.WriteResult(w, b)
}

func knows(codes []string, code string) bool {
	for _, c := range codes {
		if c == code {
			return true
		}
	}
	return false
}

// scopeOf finds the account and region of a request. An account the
// gateway mapped from the access key (access_keys) is known from then on.
func (r *Registry) scopeOf(req *http.Request) Scope {
	id, err := awsjson.IdentityOf(req)
	if err != nil {
		return DefaultScope
	}
	sc := Scope{Account: id.Account, Region: id.Region}.normal()
	if id.Account != id.AccessKeyID {
		r.markKnown(sc)
	}
	return sc
}

// markKnown notes that sc's account is one the operator named.
func (r *Registry) markKnown(sc Scope) {
	if _, ok := r.known.Load(sc.key()); !ok {
		r.known.Store(sc.key(), true)
	}
}

func (r *Registry) isKnown(scope string) bool {
	_, ok := r.known.Load(scope)
	return ok
}

// update and view run fn on sc's state in the store.
func (r *Registry) update(ctx context.Context, sc Scope, fn func(*state) error) error {
	return r.store.update(ctx, sc.key(), r.isKnown(sc.key()), fn)
}

func (r *Registry) view(ctx context.Context, sc Scope, fn func(*state) error) error {
	return r.store.view(ctx, sc.key(), false, fn)
}

// decode reads a JSON request document into v. An empty body is {}.
func decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(body))
	if err := d.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return invalid("%s: want a JSON %s, got %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		return invalid("request body is not a valid JSON document: %v", err)
	}
	if d.More() {
		return invalid("request body holds more than one JSON document")
	}
	return nil
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "string"
	case "map", "struct", "ptr":
		return "object"
	case "slice":
		return "array"
	case "bool":
		return "boolean"
	default:
		return "number"
	}
}

// newOpID returns an OperationId in AWS's form: 32 random lowercase
// letters and digits, '-', and the time it was made in Unix milliseconds,
// base 36 (8 digits until 2059), as in the model's examples
// ("gv4g5meo7ndmeh4fqskygvk23d2fijwa-k9302yzd" for an operation created at
// 1587055860.121).
func (r *Registry) newOpID() (string, error) {
	id, err := r.newID("", 32)
	if err != nil {
		return "", err
	}
	return id + "-" + strconv.FormatInt(r.nowMillis(), 36), nil
}

// newID returns prefix and n random lowercase letters and digits.
func (r *Registry) newID(prefix string, n int) (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	r.randMu.Lock()
	_, err := io.ReadFull(r.rand, b)
	r.randMu.Unlock()
	if err != nil {
		return "", fmt.Errorf("cloudmap: random id: %w", err)
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return prefix + string(b), nil
}

// shuffleWith puts list in a random order seeded from src.
func shuffleWith[T any](src io.Reader, mu *sync.Mutex, list []T) error {
	if len(list) < 2 {
		return nil
	}
	var seed [16]byte
	mu.Lock()
	_, err := io.ReadFull(src, seed[:])
	mu.Unlock()
	if err != nil {
		return fmt.Errorf("cloudmap: random order: %w", err)
	}
	rng := mrand.New(mrand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])))
	rng.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
	return nil
}

func (r *Registry) shuffle(list []*instance) error { return shuffleWith(r.rand, &r.randMu, list) }

func (r *Registry) nowMillis() int64 { return r.now().UnixMilli() }

// epoch renders Unix milliseconds as the epoch seconds AWS JSON uses.
func epoch(ms int64) json.Number {
	return json.Number(strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64))
}

func arn(sc Scope, kind, id string) string {
	return "arn:aws:servicediscovery:" + sc.Region + ":" + sc.Account + ":" + kind + "/" + id
}
