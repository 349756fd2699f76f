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
// The other operations of the model ([Unsupported]) answer
// NoAvailableOrganizationException (the template operations, as AWS
// answers an account outside an organization) or AccessDeniedException.
//
// # Requests and approval
//
// A request must ask for more than the account's current value
// (IllegalArgumentException otherwise); a second open request on the same
// quota is ResourceAlreadyExistsException, more than 20 open requests per
// account QuotaExceededException. The [Policy] decides at once: APPROVED
// within its auto-approval bounds, NOT_APPROVED above its ceiling, else
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
// Requests and approved values are one document: in memory, or with
// Options.Redis one JSON value in Redis with a version beside it, changed
// by WATCH/MULTI transactions, so every node sharing the Redis store
// applies the same values and they survive restarts. A node applies its
// own changes at once and other nodes' within Options.PollInterval
// (200 ms) through Run.
//
// # Lifecycle
//
//	s, err := servicequotas.New(servicequotas.Options{Config: cfg, Policy: p, Redis: rdb})
//	gateway.New(gateway.Options{Handlers: map[string]http.Handler{"servicequotas": s},
//		Limits: s, AdminHandlers: s.AdminHandlers()})
//	go s.Run(ctx)             // follow other nodes; returns when ctx ends
//	s.SetConfig(newCfg, newP) // on reload
package servicequotas
