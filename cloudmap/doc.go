// Package cloudmap is a local AWS Cloud Map registry: an http.Handler that
// speaks the Cloud Map API (AWS JSON 1.1, X-Amz-Target
// Route53AutoNaming_v20170314.<Operation>, spoken through package awsjson)
// well enough that an unmodified
// AWS SDK servicediscovery client can create namespaces and services,
// register instances and discover them.
//
// It owns the registry's state: namespaces, services, instances, their
// health and each service's InstancesRevision, kept in memory or, with
// Options.Redis, in Redis so that several tollgate nodes answer the same
// registry. It never throttles: the gateway does that before a request gets
// here (the registry is the cloudmap preset's in-process upstream, see
// gateway.Options.Handlers). It serves no DNS, runs no health checks and
// checks no signatures.
//
// # Operations
//
// CreateHttpNamespace, CreatePrivateDnsNamespace (stored; no DNS served),
// ListNamespaces, GetNamespace, DeleteNamespace, CreateService,
// ListServices, GetService, DeleteService, RegisterInstance,
// DeregisterInstance, GetInstance, ListInstances, GetInstancesHealthStatus,
// UpdateInstanceCustomHealthStatus, DiscoverInstances,
// DiscoverInstancesRevision and GetOperation. Each answers only with the
// error codes the AWS SDK knows for it (InvalidInput, NamespaceNotFound,
// ServiceNotFound, InstanceNotFound, NamespaceAlreadyExists,
// ServiceAlreadyExists, ResourceInUse, ResourceLimitExceeded,
// CustomHealthNotFound, DuplicateRequest, OperationNotFound); an unknown
// operation gets UnknownOperationException.
//
// Changes take effect at once. Operations that AWS runs asynchronously
// (namespace creation and deletion, RegisterInstance, DeregisterInstance)
// return an OperationId that GetOperation reports SUBMITTED until
// Options.OperationDelay has passed on Options.Now, and SUCCESS after.
// A retried request with the same CreatorRequestId returns the first
// request's OperationId and changes nothing.
//
// # Scopes
//
// As in AWS, every account and region has its own registry. The account is
// the X-Tollgate-Account header the gateway sets (awsjson.HeaderAccount),
// else the access key id of the SigV4 credential; the region is the
// credential's. A request with no Authorization header is scoped to
// DefaultScope.
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
// Each scope's state is one document: in memory under one lock, or in
// Redis as one JSON value with its revision counter beside it, changed by
// optimistic WATCH/MULTI transactions (so InstancesRevision only grows,
// whichever node makes the change) and re-read by a node only when that
// counter moved. Options.Limits bound it (AWS's published quotas by
// default: 50 namespaces, 1,000 instances per service, 2,000 per
// namespace, 30 custom attributes of at most 255/1,024 characters and
// 5,000 in all per instance), and request bodies are bounded.
package cloudmap
