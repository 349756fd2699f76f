// Package cloudmap is a local AWS Cloud Map registry: an http.Handler that
// speaks the Cloud Map API (AWS JSON 1.1, X-Amz-Target
// Route53AutoNaming_v20170314.<Operation>, spoken through package awsjson)
// well enough that an unmodified
// AWS SDK servicediscovery client can create namespaces and services,
// register instances and discover them.
//
// It owns the registry's state: namespaces, services, instances, their
// health and each service's InstancesRevision, kept in memory, with
// Options.Durable in an embedded store on disk (state/bolt: every change
// written, as the records Redis holds, before its answer; memory holds
// the scopes recently used, up to Options.CacheBytes), or with
// Options.Redis in Redis so that several tollgate nodes answer the same
// registry. It never throttles: the gateway does that before a request gets
// here (the registry is the cloudmap preset's in-process upstream, see
// gateway.Options.Handlers). It serves no DNS, runs no health checks and
// checks no signatures.
//
// # Operations
//
// All 30 operations of the model (botocore servicediscovery/2017-03-14):
// namespaces (HTTP, private and public DNS, stored; no DNS served) and
// their updates, services, their updates and attributes, instances,
// custom health, DiscoverInstances (in random order, drawn from
// Options.Rand) and DiscoverInstancesRevision, GetOperation,
// ListOperations and tags. Each answers only with the error codes the
// model declares for it; an unknown operation gets
// UnknownOperationException, and a store failure ServiceUnavailable (503,
// which AWS SDKs retry).
//
// Changes take effect at once. Operations that AWS runs asynchronously
// (namespace creation, update and deletion, UpdateService,
// RegisterInstance, DeregisterInstance) return an OperationId that
// GetOperation reports SUBMITTED until Options.OperationDelay has passed
// on Options.Now, and SUCCESS after. A retried request with the same
// CreatorRequestId (UpdaterRequestId) returns the first request's
// OperationId and changes nothing; one reused for another instance is
// DuplicateRequest. As the model says, health updates do not move
// InstancesRevision.
//
// # Scopes
//
// As in AWS, every account and region has its own registry. The account is
// the X-Tollgate-Account header the gateway sets (awsjson.HeaderAccount),
// else the access key id of the SigV4 credential; the region is the
// credential's. A request with no Authorization header is scoped to
// DefaultScope. Every account is shown as a 12-digit id: a 12-digit name
// is its own, any other gets one derived from its SHA-256.
//
// # Lifecycle
//
//	r, err := cloudmap.New(cloudmap.Options{})     // starts nothing
//	gateway.New(gateway.Options{Handlers: map[string]http.Handler{"cloudmap": r}})
//	r.RegisterInstance(ctx, scope, ns, svc, id, attrs) // from Go
//	r.DeregisterInstance(ctx, scope, ns, svc, id)
//	spec.Registrar = r.Registrar(scope, ns, svc, attrs) // a pool.ServiceSpec's
//
// A Registry starts no goroutine; with Redis, closing the client is the
// caller's.
//
// # State and limits
//
// In memory, all scopes are under one lock. In Redis, each scope is a set
// of records (namespaces, services, revisions, tags and operations in one
// hash, each service's instances in another) beside a revision counter and
// a stream of changes; a change is one Lua script that checks the counter
// and writes only what changed, so its cost does not grow with the
// registry (see redisStore). Each node caches the scopes it reads, at
// most Options.RedisCacheBytes of them (least recently used forgotten
// first), and follows the stream. While Redis does not answer within
// Options.StoreTimeout, DiscoverInstances and DiscoverInstancesRevision
// answer from the state the node last read (at most Options.MaxStale old);
// everything else fails. The client must honour context deadlines
// (go-redis ContextTimeoutEnabled, as tollgate's own client does).
//
// Options.Limits bound it: AWS's per-account quotas (50 namespaces, 10,000
// services, 1,000 instances per service, 2,000 per namespace, 30 custom
// attributes of at most 255/1,024 characters and 5,000 in all per
// instance, 50 tags per resource), and a budget that the accounts nobody
// named share, each at most a share of it in all its regions together
// (accounts the gateway mapped from an access key, DefaultScope and the
// Go API's are never refused for it): in memory, or in Redis, where every
// node draws on the same one. Which regions are served is the gateway's
// to decide (the config's regions). Request bodies are bounded.
package cloudmap
