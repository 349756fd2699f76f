// Package config is tollgate's config file: it reads one YAML file
// within bounds, validates all of it, and composes the settings of every
// part the file configures. It owns the file format and nothing that
// runs: it starts no goroutine, opens no listener, starts no process and
// never reads the clock.
//
// # What it holds
//
// A [Config] is one file, built whole or not at all:
//
//   - Quota, the throttling policy (services, categories, overrides,
//     access keys, routes), as package quota's model types;
//   - Autoscale, each autoscaled service's process contract or
//     Kubernetes target, readiness, environment, Cloud Map registration
//     and engine bounds;
//   - Store, where bucket state lives;
//   - RLS, how the Envoy rate limit service runs and where envoy
//     ratelimit's config directory is;
//   - Warnings, what is valid but likely not meant.
//
// Every problem is reported with file:line:column and field path
// ([FieldError], [ConfigErrors]), all of them at once, and every error
// matches [ErrInvalidConfig].
//
// # Where each part's settings type lives
//
// Imports point down: package node (the assembly) imports config, and
// config imports only the parts whose types it fills. So a settings type
// lives with the part when that part is below config and takes the type
// itself, and in config otherwise:
//
//   - quota's Service, Category, Throttle, Override and Route stay in
//     quota: the gateway resolves requests against them and must not
//     import the file format. A service's autoscale section is not in
//     quota; quota.Service.Autoscaled only says the pool is its upstream.
//   - autoscale.Config (targets and bounds) stays in autoscale: the
//     engine takes it as is, and config fills it.
//   - [Autoscale], [Kubernetes], [CloudMap], [Store] and [RLS] live here:
//     their users (pool/process, pool/kube, cloudmap, limiter/redis, rls)
//     take their own Options, which the assembly builds from these
//     sections and from flags, so none of those parts needs to know the
//     file. Putting the sections in those parts would make config import
//     gRPC, client-go and go-redis, and would make each part depend on
//     tollgate's file format.
//
// A new setting of a part is a field of its section type here, parsed in
// that section's file (autoscale.go, cloudmap.go, rls.go, store in
// parse.go), and carried into the part's Options by the assembly.
//
// # Lifecycle
//
//  1. [Load] (or [ReadFile] then [Parse]) reads and validates the file;
//     an empty path means [Default].
//  2. The caller builds its parts from the Config's fields.
//  3. A reload calls Load again and, when it succeeds, swaps parts whose
//     settings changed; a failed Load leaves the old Config in use.
package config
