package config

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/internal/suggest"
	"github.com/tollgate/tollgate/internal/yamlfield"
	"github.com/tollgate/tollgate/quota"
)

// ErrInvalidConfig is matched (with errors.Is) by every error of [Parse],
// [Load] and [ReadFile].
var ErrInvalidConfig = yamlfield.ErrInvalidConfig

// FieldError is one problem in a config file, located by file, line and
// field path (e.g. "services[0].categories[2].capacity"). Its Error method
// formats it as "file:line:column: field: message", and it matches
// [ErrInvalidConfig]. Package rls reports envoy's files with it too.
type FieldError = yamlfield.FieldError

// ConfigErrors is every problem found in one config file, one per line of
// its message, in file order. It unwraps to its FieldErrors, so errors.As
// finds a *FieldError, and it matches [ErrInvalidConfig].
type ConfigErrors = yamlfield.Errors

// storeSchemes are the URL schemes a store may have besides "memory".
var storeSchemes = []string{"redis", "rediss", "unix", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel"}

// Names of services and categories: they appear in bucket keys, so they
// stay clear of the key's separators.
var (
	namePattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	actionPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)
	// errorCodePattern is an AWS error code, with a SOAP fault's prefix
	// as EC2 logs it ("Client.RequestLimitExceeded") or without.
	errorCodePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)?$`)
	// accountChars and accessKeyChars are compiled on first use: their
	// bounded repetitions make ~3,000 allocations, which every tollgate
	// process (each instance supervisor included) paid at init.
	accountChars = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`) })
	// accessKeyChars is what a SigV4 credential scope can carry as an
	// access key id (awsjson.ParseAuthorization accepts no more).
	accessKeyChars = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_]{1,128}$`) })
)

// Parse parses a YAML config; file names the source in errors. The format:
//
//	services:
//	  - preset: ecs                  # a built-in service: ecs or cloudmap
//	  - preset: cloudmap
//	    upstream: http://127.0.0.1:9000   # proxy allowed requests here
//	  - name: orders                 # a service of your own
//	    target_prefix: Orders_20240101   # X-Amz-Target prefix (optional)
//	    signing_name: orders         # SigV4 service name (optional)
//	    throttle: {code: ThrottlingException, message: Rate exceeded, status: 400}
//	    categories:
//	      - name: read
//	        capacity: 50             # burst
//	        refill_per_second: 20    # sustained rate
//	        actions: [GetOrder, ListOrders]
//	    autoscale: {command: [./orders]}  # optional: run the upstream here (below)
//	  - name: hello                  # an autoscaled service reached by its route
//	    route:
//	      path_prefix: /hello/       # and/or host: hello.example.com
//	      strip_prefix: true         # the instance sees /hello/x as /x
//	    autoscale:                   # Cloud Run's container contract, locally
//	      command: [./hello]         # started with PORT (and K_SERVICE,
//	      args: [--verbose]          #   K_REVISION, K_CONFIGURATION) set
//	      env: {GREETING: hi}        # or [{name: GREETING, value: hi}]
//	      working_dir: .             # relative to this file; default: its directory
//	      readiness: {path: /healthz, timeout: 30s}  # default: TCP connect
//	      liveness: {path: /healthz}  # optional: probed every 10s (period), 1s timeout,
//	                                 #   unhealthy after 3 failures in a row (failure_threshold),
//	                                 #   initial_delay 0s: replaced, over max instances if need be
//	      max_concurrency: 80        # requests at once per instance (default 80)
//	      cpus: 1                    # CPUs per instance (default 1)
//	      cpu_target: 0.6            # (default 0.6)
//	      concurrency_target: 0.6    # (default 0.6)
//	      min_instances: 0
//	      max_instances: 10          # (default 100)
//	      idle_timeout: 15m          # (default 15m, as Cloud Run; 10m with gpu, and at most that)
//	      gpu: 0                     # GPUs per instance: kept idle 10 minutes at most
//	      termination_grace_period: 10s  # SIGTERM to SIGKILL (default 10s)
//	      traffic:                   # optional: split over running revisions (percents sum to 100)
//	        - {revision: hello-00001, percent: 90}     # a revision by name
//	        - {latest_revision: true, percent: 10, tag: canary}  # canary---host reaches it
//	      sticky: {header: X-User-Id}  # optional: split per client ({cookie: NAME}, {client_address: true}), not per request
//	overrides:                       # quota increases
//	  - service: ecs
//	    account: "123456789012"
//	    region: us-east-1            # optional: omit for every region
//	    category: cluster-read
//	    capacity: 100
//	    refill_per_second: 40
//	regions: [aws, onprem-east-1]    # served regions: partitions (aws, aws-cn, aws-us-gov, …) and/or
//	                                 #   region names; default every region of AWS's partitions
//	access_keys:                     # access key id -> account id
//	  AKIAIOSFODNN7EXAMPLE: "123456789012"
//	store:                           # where bucket state lives (default: memory)
//	  url: redis://127.0.0.1:6379/0  # shared by every node using it
//	  data_dir: state                # without Redis: the registry's and quotas' durable file (relative to this file)
//	  timeout: 50ms                  # per call
//	  on_failure: local              # local (each node's own bucket), open (allow) or closed (deny) while down
//	  tls: {ca_file: redis-ca.crt}   # with rediss://: Redis's CA, a client cert_file/key_file; see [TLS]
//	  cache:                         # durable state held in memory (read at start); see [StoreCache]
//	    cloud_map_bytes: 64Mi        # Cloud Map scopes, estimated (default 64Mi over data_dir, 128Mi over Redis)
//	    service_quotas_requests: 20000  # Service Quotas requests over data_dir (default 20000)
//	rls:                             # Envoy's rate limit service (gRPC); see [RLS]
//	  config_dir: ratelimit/config   # envoy ratelimit's config directory, read as is
//	  grpc_listen: 127.0.0.1:8081
//	  response_headers: true         # RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset
//	  tls: {cert_file: tls.crt, key_file: tls.key, client_ca_file: ca.crt}  # optional; see [TLS]
//	service_quotas:                  # the Service Quotas API's approval policy; see [ServiceQuotas]
//	  approval:
//	    - {service: ecs, auto_approve_factor: 2, max: 1000}
//
// Every problem is reported, each with its line and field, as
// [ConfigErrors]; nothing is partially applied.
func Parse(file string, data []byte) (*Config, error) {
	p := &parser{file: file, w: yamlfield.Walker{File: file}}
	root, ferr := yamlfield.DecodeOne(file, data)
	if ferr != nil {
		return nil, ConfigErrors{ferr}
	}
	if root == nil {
		p.errorf(nil, "", "the file is empty; it needs at least a services list")
		return nil, p.w.Errs
	}
	cfg := p.config(root)
	if len(p.w.Errs) > 0 {
		return nil, p.w.Errs
	}
	cfg.Warnings = p.warnings(cfg)
	return cfg, nil
}

// parser reads one config file; its yamlfield.Walker holds the problems.
type parser struct {
	file      string
	w         yamlfield.Walker
	cloudMaps []located    // every autoscale.cloud_map section
	sqNodes   []*yaml.Node // every service_quotas.approval rule
}

// located is a node of the file with its field path.
type located struct {
	n     *yaml.Node
	field string
}

// answersCloudMap reports whether s is the cloudmap preset as tollgate
// serve answers it: from its own registry (the handler of the service
// named cloudmap), which an upstream or an autoscale pool replaces.
func answersCloudMap(s *quota.Service) bool {
	cm, _ := quota.Preset("cloudmap")
	return s.Name == "cloudmap" && s.TargetPrefix == cm.TargetPrefix && s.Upstream == "" && !s.Autoscaled
}

func (p *parser) warnings(cfg *Config) []*FieldError {
	var out []*FieldError
	if !slices.ContainsFunc(cfg.Quota.Services(), answersCloudMap) {
		for _, at := range p.cloudMaps {
			out = append(out, &FieldError{File: p.file, Line: at.n.Line, Column: at.n.Column, Field: at.field,
				Msg: "no service of this config answers Cloud Map's API from tollgate's registry (add `- preset: cloudmap`, without upstream or autoscale, to services), so DiscoverInstances reaches these instances only through another tollgate sharing the store"})
		}
	}
	return out
}

// fieldAt is where a parsed entry stands in the file: its node and its
// field path (with its index in the file's list, which counts the
// entries that failed to parse).
type fieldAt struct {
	node *yaml.Node
	path string
}

func (p *parser) config(root *yaml.Node) *Config {
	var services []*quota.Service
	var serviceNodes []*yaml.Node
	var scales []*Autoscale // by index of services
	var overrides []quota.Override
	var overrideAt []fieldAt // by index of overrides: where each is in the file
	accessKeys := map[string]string{}
	var store Store
	var storeTLS *yaml.Node // the store's tls section
	var rls RLS
	var sq ServiceQuotas
	var auth Auth
	var servicesNode *yaml.Node
	var regions *awsjson.Regions // nil: every AWS region
	regionsGiven := false
	p.fields(root, "", map[string]func(k, v *yaml.Node, f string){
		"services": func(_, v *yaml.Node, f string) {
			servicesNode = v
			for i, sn := range p.list(v, f) {
				if s, a := p.service(sn, fmt.Sprintf("%s[%d]", f, i)); s != nil {
					services = append(services, s)
					scales = append(scales, a)
					serviceNodes = append(serviceNodes, sn)
				}
			}
		},
		"overrides": func(_, v *yaml.Node, f string) {
			for i, on := range p.list(v, f) {
				if o, ok := p.override(on, fmt.Sprintf("%s[%d]", f, i)); ok {
					overrides = append(overrides, o)
					overrideAt = append(overrideAt, fieldAt{on, fmt.Sprintf("%s[%d]", f, i)})
				}
			}
		},
		"store": func(_, v *yaml.Node, f string) {
			p.fields(v, f, map[string]func(k, v *yaml.Node, f string){
				"url": func(_, v *yaml.Node, f string) {
					s, ok := p.str(v, f)
					if !ok {
						return
					}
					if u, err := url.Parse(s); s != "memory" && (err != nil || !slices.Contains(storeSchemes, u.Scheme)) {
						p.errorf(v, f, "%q is not memory or a %s URL", s, strings.Join(storeSchemes, "://, ")+"://")
						return
					}
					store.URL = s
				},
				"data_dir": func(_, v *yaml.Node, f string) {
					s, ok := p.str(v, f)
					if !ok {
						return
					}
					if s == "" {
						p.errorf(v, f, "is empty: give a directory, or leave data_dir out (serve's --data-dir '' keeps state in memory)")
						return
					}
					store.DataDir = p.relative(s)
				},
				"timeout": func(_, v *yaml.Node, f string) {
					s, ok := p.str(v, f)
					if !ok {
						return
					}
					d, err := time.ParseDuration(s)
					if err != nil || d <= 0 {
						p.errorf(v, f, "%q is not a positive duration such as 50ms", s)
						return
					}
					if d < MinStoreTimeout {
						p.errorf(v, f, "%s is below %v, less than a Redis round trip can take: every decision would be made without Redis, by store.on_failure; use at least %v (the default is 50ms)", s, MinStoreTimeout, MinStoreTimeout)
						return
					}
					store.Timeout = d
				},
				"on_failure": func(_, v *yaml.Node, f string) {
					s, ok := p.str(v, f)
					if !ok {
						return
					}
					switch s {
					case "local", "fail-local":
						store.OnFailure = "local"
					case "open", "fail-open":
						store.OnFailure = "open"
					case "closed", "fail-closed":
						store.OnFailure = "closed"
					default:
						p.errorf(v, f, "%q: want local (each node decides from its own bucket while the store is down), open (allow) or closed (deny); fail-local, fail-open and fail-closed also work", s)
					}
				},
				"tls": func(_, v *yaml.Node, f string) {
					store.TLS = p.tls(v, f, "ca_file", false)
					storeTLS = v
				},
				"cache": func(_, v *yaml.Node, f string) { store.Cache = p.storeCache(v, f) },
			})
			if storeTLS != nil && store.URL != "" && !strings.HasPrefix(store.URL, "rediss") {
				p.errorf(storeTLS, f+".tls", "the store URL %s is not a TLS URL: use rediss:// (or rediss+cluster://, rediss+sentinel://) with a tls section", strings.SplitN(store.URL, ":", 2)[0]+"://")
			}
		},
		"regions":        func(_, v *yaml.Node, f string) { regions, regionsGiven = p.regions(v, f), true },
		"rls":            func(_, v *yaml.Node, f string) { rls = p.rls(v, f) },
		"service_quotas": func(_, v *yaml.Node, f string) { sq = p.serviceQuotas(v, f) },
		"auth": func(_, v *yaml.Node, f string) {
			p.fields(v, f, map[string]func(k, v *yaml.Node, f string){
				"credentials_file": func(_, v *yaml.Node, f string) {
					if s, ok := p.str(v, f); ok && s == "" {
						p.errorf(v, f, "empty: name an AWS shared credentials file, or leave the field out")
					} else if ok {
						auth.CredentialsFile = p.relative(s)
					}
				},
			})
		},
		"access_keys": func(_, v *yaml.Node, f string) {
			if v.Kind != yaml.MappingNode {
				p.errorf(v, f, "want a mapping of access key id to account id, got %s", kindName(v))
				return
			}
			for i := 0; i+1 < len(v.Content); i += 2 {
				k, a := v.Content[i], v.Content[i+1]
				kf := joinField(f, k.Value)
				key, ok1 := p.name(k, kf, accessKeyChars(), "access key id")
				acct, ok2 := p.name(a, kf, accountChars(), "account id")
				if !ok1 || !ok2 {
					continue
				}
				if _, dup := accessKeys[key]; dup {
					p.errorf(k, kf, "given twice")
					continue
				}
				accessKeys[key] = acct
			}
		},
	})
	if root.Kind == yaml.MappingNode && servicesNode == nil {
		p.errorf(root, "services", "missing: a config needs at least one service")
	} else if servicesNode != nil && servicesNode.Kind == yaml.SequenceNode && len(servicesNode.Content) == 0 {
		p.errorf(servicesNode, "services", "empty: a config needs at least one service")
	}

	// Cross-checks: duplicate services and prefixes, overrides that name
	// something that does not exist, overrides given twice.
	byName := map[string]*quota.Service{}
	byPrefix := map[string]string{}
	for i, s := range services {
		n := serviceNodes[i]
		f := fmt.Sprintf("services[%d]", slices.Index(servicesNode.Content, n))
		if _, dup := byName[s.Name]; dup {
			p.errorf(n, f, "duplicate service %q", s.Name)
			continue
		}
		byName[s.Name] = s
		if s.TargetPrefix != "" {
			if other, dup := byPrefix[s.TargetPrefix]; dup {
				p.errorf(n, f+".target_prefix", "target prefix %q is already used by service %q", s.TargetPrefix, other)
				continue
			}
			byPrefix[s.TargetPrefix] = s.Name
		}
	}
	p.checkServiceQuotas(sq, byName)
	routes := map[quota.Route]string{}
	for i, s := range services {
		if s.Route == nil {
			continue
		}
		k := quota.Route{PathPrefix: strings.TrimSuffix(s.Route.PathPrefix, "/"), Host: s.Route.Host}
		if other, dup := routes[k]; dup {
			f := fmt.Sprintf("services[%d].route", slices.Index(servicesNode.Content, serviceNodes[i]))
			p.errorf(serviceNodes[i], f, "the same route as service %q", other)
			continue
		}
		routes[k] = s.Name
	}
	type overrideKey struct{ service, account, region, category string }
	seen := map[overrideKey]bool{}
	for i, o := range overrides {
		n, f := overrideAt[i].node, overrideAt[i].path // i skips the entries that failed above
		s, ok := byName[o.Service]
		if !ok {
			p.errorf(n, f+".service", "%v %q%s", quota.ErrUnknownService, o.Service, suggest.DidYouMean(o.Service, slices.Sorted(maps.Keys(byName))))
			continue
		}
		if _, ok := s.CategoryNamed(o.Category); !ok {
			var cats []string
			for _, c := range s.Categories {
				cats = append(cats, c.Name)
			}
			p.errorf(n, f+".category", "%v %q of service %s%s", quota.ErrUnknownCategory, o.Category, o.Service, suggest.DidYouMean(o.Category, cats))
			continue
		}
		k := overrideKey{o.Service, o.Account, o.Region, o.Category}
		if seen[k] {
			p.errorf(n, f, "a second override for the same service, account, region and category")
			continue
		}
		seen[k] = true
	}
	if !regionsGiven || regions != nil { // a bad list is reported already
		for _, at := range overrideAt {
			p.checkRegion(regions, at.node, at.path)
		}
		for _, at := range p.cloudMaps {
			p.checkCloudMapRegion(regions, at.n, at.field)
		}
	}
	if len(p.w.Errs) > 0 {
		return nil
	}
	policy, err := quota.NewConfig(services, overrides, accessKeys)
	if err != nil { // every check above ran first; this is a safety net
		p.errorf(root, "", "%v", err)
		return nil
	}
	policy = policy.WithRegions(regions)
	cfg := &Config{File: p.file, Quota: policy, Store: store, RLS: rls, ServiceQuotas: sq, Auth: auth}
	for i, a := range scales {
		if a != nil {
			if cfg.Autoscale == nil {
				cfg.Autoscale = map[string]*Autoscale{}
			}
			cfg.Autoscale[services[i].Name] = a
		}
	}
	return cfg
}
