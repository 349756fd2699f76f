// Package servicequotas is a local AWS Service Quotas API (AWS JSON 1.1,
// X-Amz-Target ServiceQuotasV20190624.<Operation>, botocore
// service-quotas/2019-06-24, spoken through package awsjson): tenants list
// tollgate's throttling quotas, request increases and follow them, and an
// approved increase is the account's limit at once on every node.
//
// # Quotas
//
// Every category of every service in the config (the ecs and cloudmap
// presets, the servicequotas preset itself and user-defined services) is
// two quotas, both Adjustable, unit None, applied at the ACCOUNT level per
// Region: its burst (the bucket's capacity) and its rate (the refill per
// second, Period 1 SECOND). The service code is the service's config name
// ('_' written '-'); the quota code is "L-" and 8 upper-case hex digits
// of SHA-256("tollgate/<service>/<category>/<burst|rate>") ([QuotaCode]),
// so codes are the same on every node and in every release, and change
// only when a category is renamed. `tollgate check` prints them.
//
// # Operations
//
// ListServices, ListServiceQuotas, GetServiceQuota,
// ListAWSDefaultServiceQuotas, GetAWSDefaultServiceQuota,
// RequestServiceQuotaIncrease, GetRequestedServiceQuotaChange,
// ListRequestedServiceQuotaChangeHistory and
// ListRequestedServiceQuotaChangeHistoryByQuota, with the model's
// pagination (MaxResults 1–100, opaque NextToken), filters and errors;
// and StartQuotaUtilizationReport and GetQuotaUtilizationReport, which
// answer from what the gateway saw (Options.Usage): every quota of the
// caller's account whose bucket was used in the last hour, with its peak
// use in percent (100: it throttled), most used first.
//
// # Utilisation
//
// AWS can only approximate usage from CloudWatch; tollgate decides every
// request. The model's ServiceQuota has no usage value, only UsageMetric
// (the CloudWatch metric that would hold it), which GetServiceQuota and
// the lists fill as AWS does (AWS/Usage CallCount, by Service, Type API,
// Resource and Class); the numbers are in the utilization report, and
// per account and bucket in the gateway's live view
// (GET /v1/admin/live/usage and the page at /ui/).
//
// # Tags
//
// TagResource, UntagResource and ListTagsForResource act on the quota
// ARNs the API answers (arn:aws:servicequotas:REGION:ACCOUNT-ID:
// SERVICE/QUOTA-CODE) with the model's limits: keys of 1 to 128 and
// values of 0 to 256 letters, digits, spaces and _ . : / = + - @ (the
// aws: prefix reserved), 1 to 200 in a call, at most [MaxTagsPerQuota]
// on a quota (TooManyTagsException, none applied). A caller tags only
// its own account's ARNs, in the Region it signs for: another account's
// ARN is AccessDeniedException whether or not the quota exists, an ARN
// of no quota NoSuchResourceException. tollgate has no tag policies, so
// TagPolicyViolationException is never answered.
//
// # Automatic Management
//
// AWS's Automatic Management sends AWS User Notifications as quotas run
// low; tollgate has none to send, so no account can opt in:
// GetAutoManagementConfiguration, StopAutoManagement and
// UpdateAutoManagement answer NoSuchResourceException, as AWS answers an
// account that has not opted in, and StartAutoManagement, its input
// checked as the model does, AccessDeniedException saying why. The
// utilisation is in the report above.
//
// The other operations of the model ([Unsupported]) answer
// NoAvailableOrganizationException (the template operations, as AWS
// answers an account outside an organization) or AccessDeniedException
// (CreateSupportCase).
//
// # Requests and approval
//
// A request must ask for more than the account's current value
// (IllegalArgumentException otherwise); a second open request on the same
// quota is ResourceAlreadyExistsException, more than 20 open requests per
// account QuotaExceededException. The [Policy] decides at once: APPROVED
// within its auto-approval bounds, NOT_APPROVED above its ceiling (the
// burst's and the rate's each in their own unit), else
// PENDING until an operator approves or denies it with a reason through
// [Service.AdminHandlers]. An approved value replaces the config's value
// (default or the file's override) of that quota for that account and
// Region: the approval is the later, explicit decision, and a reload of
// the file keeps it. An operator lowers or removes a value with the
// admin endpoint; a lower burst takes effect on the bucket's next take
// (a bucket fuller than the new capacity is cut to it), so a tenant sees
// at most the new burst at once and the new rate after.
//
// # State and nodes
//
// Each request is its own record beside per-account indexes, in memory
// (with Options.Durable on disk in an embedded store, each change written
// before its answer, memory holding the accounts recently used up to
// Options.CacheRequests; see Table) or with Options.Redis in Redis (a
// hash per request, sorted sets per account, applied values one hash
// field each; see redisPrefix). Making
// or deciding a request is one atomic step (a Lua script in Redis) that
// touches only that request, its account's indexes and a few shared
// counters, so a write costs the same however many requests others made,
// and a request and the value it applies change together. Every node
// sharing the Redis store applies the same values and they survive
// restarts: a node applies its own changes at once and other nodes'
// within Options.PollInterval (200 ms) through Run, which reads them
// only when their version key moved. A Redis store of an earlier release
// (one JSON document) is moved into these keys at the first Refresh.
//
// # Bounds
//
// What one account writes never removes another's requests: each account
// keeps its last [MaxClosedPerAccount] decided requests and at most
// [MaxOpenPerAccount] open ones. Access keys the config's access_keys does
// not map are each their own account and share one pool besides:
// [MaxOpenUnmapped] open requests, [MaxClosedUnmapped] decided ones kept
// and [MaxAppliedUnmapped] automatically approved values, beyond which
// they get QuotaExceededException at once. Tags are bounded the same
// way: an account tags at most [MaxTaggedPerAccount] quota ARNs over
// every Region, unmapped accounts [MaxTaggedUnmapped] together
// (TooManyTagsException beyond). Memory therefore grows with
// the accounts the config names, not with the keys callers make up. The
// admin listing is paged ([DefaultAdminPage], at most [MaxAdminPage]).
//
// # Lifecycle
//
//	s, err := servicequotas.New(servicequotas.Options{Config: cfg, Policy: p, Redis: rdb})
//	gateway.New(gateway.Options{Handlers: map[string]http.Handler{"servicequotas": s},
//		Limits: s, AdminHandlers: s.AdminHandlers()})
//	go s.Run(ctx)             // follow other nodes; returns when ctx ends
//	s.SetConfig(newCfg, newP) // on reload
package servicequotas
