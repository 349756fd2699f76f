package config

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// Config is one config file, parsed and validated: the throttling policy
// and the settings of every other part the file configures. It is built
// whole or not at all, and treated as read-only once built, so that a
// reload builds a new one and compares.
type Config struct {
	// File is the path the config was read from; "" for [Default].
	File string
	// Quota is the throttling policy: services, categories, overrides and
	// access keys. Never nil.
	Quota *quota.Config
	// Autoscale is the autoscale section of every autoscaled service, by
	// service name (the services whose Autoscaled is true); nil when none
	// is.
	Autoscale map[string]*Autoscale
	// Store is the store section.
	Store Store
	// RLS is the rls section.
	RLS RLS
	// ServiceQuotas is the service_quotas section: the approval policy
	// of quota increase requests.
	ServiceQuotas ServiceQuotas
	// Auth is the auth section: how AWS requests prove who they are.
	Auth Auth
	// Warnings is what in the file is valid but likely not what its
	// author meant, each located as a config error is: an autoscaled
	// service listed in Cloud Map (cloud_map) when no service of the
	// config answers Cloud Map's API (no `preset: cloudmap`, or one whose
	// requests go to an upstream or an autoscale pool rather than to
	// tollgate's own registry), so that only another tollgate sharing the
	// Redis store could answer DiscoverInstances for it.
	Warnings []*FieldError
}

// Default returns the config tollgate serves with no file: the built-in
// ecs, cloudmap and servicequotas presets ([quota.Default]), no rls
// section, and [DefaultApproval] deciding increase requests.
func Default() *Config {
	return &Config{Quota: quota.Default(), ServiceQuotas: ServiceQuotas{Approval: []Approval{DefaultApproval}}}
}

// DefaultApproval is the approval rule of the config tollgate serves with
// no file, as AWS approves small increases without a person: a request
// up to twice a quota's default is APPROVED at once, one above 20 times
// is NOT_APPROVED, and one between waits PENDING for an operator (the
// admin API, with an admin token). A config file's service_quotas
// section replaces it; a file without one leaves every request PENDING.
var DefaultApproval = Approval{AutoApproveFactor: 2, MaxFactor: 20}

// Auth is the auth section of a config file:
//
//	auth:
//	  credentials_file: credentials   # AWS shared credentials format; relative to this file
//
// With a credentials file, every AWS request must carry a valid Signature
// Version 4 by one of its keys (the --credentials flag wins over it). The
// zero Auth trusts the access key id a request claims.
type Auth struct {
	// CredentialsFile is the credentials file, absolute (a relative one is
	// taken from the config file's directory); "" for none.
	CredentialsFile string
}

// Store is where a server keeps bucket state, as a config file says. The
// zero Store means the in-memory default.
type Store struct {
	// URL is "memory" (or empty) or a Redis URL: redis://, rediss://, or
	// a cluster or sentinel form.
	URL string
	// DataDir is the directory of the embedded durable store, which keeps
	// the Cloud Map registry and Service Quotas' requests and values
	// without Redis; absolute (a relative one is taken from the config
	// file's directory); "" for serve's --data-dir.
	DataDir string
	// Timeout bounds one call to the store; 0 means the store's default.
	// A timeout below [MinStoreTimeout] is refused.
	Timeout time.Duration
	// OnFailure is what decisions do while the store is unreachable:
	// "local" (each node decides from its own in-memory bucket), "open"
	// (allow), "closed" (deny), or "" for the store's default (local).
	OnFailure string
	// TLS is the Redis connection's CA and client certificate, for a
	// TLS URL (rediss://); zero for go-redis's defaults (the system
	// roots, no client certificate). See [TLS].
	TLS TLS
	// Cache bounds the durable state held in memory; zero fields for
	// the stores' defaults. See [StoreCache].
	Cache StoreCache
}

// MinStoreTimeout is the least store timeout a config (or serve's
// --store-timeout) may set: below a millisecond a Redis round trip (a
// network hop, a Lua call, a scheduler's turn on a loaded machine) is
// not dependably answered, every decision would be made without Redis,
// and the nodes' failure policy would decide them all. The Redis store
// also refuses, at start, a timeout below the round trip it measures.
const MinStoreTimeout = time.Millisecond

// Load reads the config file at path with [ReadFile]'s bounds (ctx ends
// a read in progress) and parses it; an empty path means [Default].
func Load(ctx context.Context, path string) (*Config, error) {
	if path == "" {
		return Default(), nil
	}
	data, err := ReadFile(ctx, "config", path, Limits{})
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}
