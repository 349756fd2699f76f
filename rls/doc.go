// Package rls is tollgate's Envoy rate limit service: a gRPC server of
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit that reads
// envoyproxy/ratelimit's configuration files as they are, so that Envoy
// (and Istio, Contour, Emissary or Gloo in front of it) can be pointed at
// tollgate instead of envoy ratelimit.
//
// The package owns the config reader ([Load], [Parse]), the matching of
// descriptors to rules ([Config.Lookup]), the decisions ([Server]) and the
// gRPC server with health and reflection ([Server.Run]). Bucket state lives
// in a [limiter.Limiter]: the memory store, or the Redis store shared by
// several tollgate nodes. The package never reads a file or starts a
// goroutine on its own: files are read by Load, goroutines run inside Run.
//
// # Semantics
//
// Requests are answered as envoy ratelimit answers them, with one
// difference: each rule is an exact token bucket, not a fixed window. A
// rule of N requests per unit is a bucket of capacity N refilled at N per
// unit (continuously, to the nanosecond): a full bucket admits N at once,
// then one more every unit/N. Envoy ratelimit's fixed window resets its
// counter at each window edge, so it admits up to 2N across an edge; the
// bucket never admits more than N + N·t/unit in any span t. A denied hit
// takes nothing (envoy ratelimit counts it against the window too).
//
// The rules of envoy ratelimit that tollgate keeps:
//
//   - Lookup order at each level of a descriptor: "key_value", then the
//     level's wildcard values in file order, then the bare key; a
//     descriptor matches only a rule at its own depth.
//   - A key without a value in the config gives every distinct value its
//     own bucket; a wildcard with share_threshold gives all values it
//     matches one bucket.
//   - hits_addend: a descriptor's own value wins and may be 0 (look only);
//     else the request's, where 0 means 1.
//   - A descriptor's limit override replaces the config's rule (and is
//     never in shadow mode), for domains the config defines.
//   - Unlimited rules answer OK with limit_remaining 2^32-1; rules named in
//     another matched rule's replaces are not applied; rules in shadow
//     mode decide and count but answer OK.
//   - overall_code is OVER_LIMIT when any descriptor not in quota mode is
//     over its limit, or when every quota-mode descriptor is.
//
// Each DescriptorStatus carries current_limit, limit_remaining (the
// bucket's whole tokens after the hit) and duration_until_reset (the time
// until the bucket is full again, at most the rule's unit); an over-limit
// status carries 0 and the wait until its hits would be admitted.
// With Options.ResponseHeaders, the answer carries envoy ratelimit's
// RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset headers (reset
// in whole seconds, rounded up) for the descriptor closest to its limit.
//
// # Lifecycle
//
//  1. Load (or Parse) the config directory; pass LoadOptions.MaxWindow =
//     limiter/redis.MaxWindow with the Redis store, so a limit it cannot
//     hold is an error of the file rather than of every request.
//  2. New(Options{Config, Limiter, Reload, …}) builds the server.
//  3. Run(ctx, listener) serves until ctx ends, then stops gracefully.
//  4. Reload (on SIGHUP) reads the config again through Options.Reload; a
//     bad config is counted and logged and the old one keeps serving.
//     Buckets are kept across reloads.
//
// # Metrics
//
// Per rule, labelled by domain and key path (as envoy ratelimit names its
// statistics, e.g. domain="messaging", key="message_type_marketing.to_number"):
// tollgate_rls_rate_limit_total_hits, _over_limit, _near_limit,
// _within_limit and _shadow_mode, counted in hits as envoy ratelimit counts
// them. Label values come from the config only (limit overrides count under
// key="limit_override"), so clients cannot grow the series. Also
// tollgate_rls_config_loads{result}, tollgate_rls_domain_not_found,
// tollgate_rls_store_errors, tollgate_rls_invalid_requests and the
// tollgate_rls_grpc_request_duration_seconds{method,code} histogram.
package rls
