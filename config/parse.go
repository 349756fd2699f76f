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

	"github.com/tollgate/tollgate/bucket"
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
//	      max_concurrency: 80        # requests at once per instance (default 80)
//	      cpus: 1                    # CPUs per instance (default 1)
//	      cpu_target: 0.6            # (default 0.6)
//	      concurrency_target: 0.6    # (default 0.6)
//	      min_instances: 0
//	      max_instances: 10          # (default 100)
//	      idle_timeout: 15m          # (default 15m, as Cloud Run)
//	      termination_grace_period: 10s  # SIGTERM to SIGKILL (default 10s)
//	overrides:                       # quota increases
//	  - service: ecs
//	    account: "123456789012"
//	    region: us-east-1            # optional: omit for every region
//	    category: cluster-read
//	    capacity: 100
//	    refill_per_second: 40
//	access_keys:                     # access key id -> account id
//	  AKIAIOSFODNN7EXAMPLE: "123456789012"
//	store:                           # where bucket state lives (default: memory)
//	  url: redis://127.0.0.1:6379/0  # shared by every node using it
//	  timeout: 50ms                  # per call
//	  on_failure: local              # local (each node's own bucket), open (allow) or closed (deny) while down
//	  tls: {ca_file: redis-ca.crt}   # with rediss://: Redis's CA, a client cert_file/key_file; see [TLS]
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

func (p *parser) errorf(n *yaml.Node, field, format string, args ...any) {
	p.w.Errorf(n, field, format, args...)
}

// fields walks a mapping node, calling each for every key; unknown keys and
// keys given twice are errors.
func (p *parser) fields(n *yaml.Node, path string, each map[string]func(key, val *yaml.Node, field string)) {
	p.w.Fields(n, path, each)
}

func joinField(path, name string) string { return yamlfield.JoinField(path, name) }

func kindName(n *yaml.Node) string { return yamlfield.KindName(n) }

func (p *parser) str(n *yaml.Node, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.errorf(n, field, "want a string, got %s", kindName(n))
		return "", false
	}
	return n.Value, true
}

func (p *parser) name(n *yaml.Node, field string, re *regexp.Regexp, what string) (string, bool) {
	s, ok := p.str(n, field)
	if !ok {
		return "", false
	}
	if !re.MatchString(s) {
		p.errorf(n, field, "%q is not a valid %s (want %s)", s, what, re)
		return "", false
	}
	return s, true
}

func (p *parser) integer(n *yaml.Node, field string) (int64, bool) {
	var v int64
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
		p.errorf(n, field, "want a whole number, got %s", kindName(n))
		return 0, false
	}
	return v, true
}

func (p *parser) number(n *yaml.Node, field string) (float64, bool) {
	var v float64
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
		p.errorf(n, field, "want a number, got %s", kindName(n))
		return 0, false
	}
	return v, true
}

func (p *parser) list(n *yaml.Node, field string) []*yaml.Node {
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, field, "want a list, got %s", kindName(n))
		return nil
	}
	return n.Content
}

// limitFields reads capacity and refill_per_second into a limit.
type limitFields struct {
	capacity    int64
	refill      float64
	hasCapacity bool
	hasRefill   bool
	capNode     *yaml.Node
	refillNode  *yaml.Node
}

func (p *parser) limitHandlers(lf *limitFields, m map[string]func(key, val *yaml.Node, field string)) {
	m["capacity"] = func(_, v *yaml.Node, f string) {
		lf.capNode = v
		if c, ok := p.integer(v, f); ok {
			if c < 1 {
				p.errorf(v, f, "capacity %d must be at least 1", c)
				return
			}
			lf.capacity, lf.hasCapacity = c, true
		}
	}
	m["refill_per_second"] = func(_, v *yaml.Node, f string) {
		lf.refillNode = v
		if r, ok := p.number(v, f); ok {
			if !(r > 0) {
				p.errorf(v, f, "refill_per_second %v must be greater than 0", r)
				return
			}
			lf.refill, lf.hasRefill = r, true
		}
	}
}

func (p *parser) limit(n *yaml.Node, path string, lf *limitFields) (bucket.Limit, bool) {
	if lf.capNode == nil {
		p.errorf(n, joinField(path, "capacity"), "missing")
	}
	if lf.refillNode == nil {
		p.errorf(n, joinField(path, "refill_per_second"), "missing")
	}
	if !lf.hasCapacity || !lf.hasRefill {
		return bucket.Limit{}, false
	}
	l, err := bucket.NewLimit(lf.capacity, lf.refill)
	if err != nil {
		// Both values are valid on their own here, so the limit fails on
		// the rate (above 1e9/s) or on the two together (too slow to
		// refill): name the rate when it alone is out of range.
		node, field := lf.capNode, "capacity"
		if lf.refill > 1e9 {
			node, field = lf.refillNode, "refill_per_second"
		}
		p.errorf(node, joinField(path, field), "%v", err)
		return bucket.Limit{}, false
	}
	return l, true
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
	var servicesNode *yaml.Node
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
			})
			if storeTLS != nil && store.URL != "" && !strings.HasPrefix(store.URL, "rediss") {
				p.errorf(storeTLS, f+".tls", "the store URL %s is not a TLS URL: use rediss:// (or rediss+cluster://, rediss+sentinel://) with a tls section", strings.SplitN(store.URL, ":", 2)[0]+"://")
			}
		},
		"rls":            func(_, v *yaml.Node, f string) { rls = p.rls(v, f) },
		"service_quotas": func(_, v *yaml.Node, f string) { sq = p.serviceQuotas(v, f) },
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
	if len(p.w.Errs) > 0 {
		return nil
	}
	policy, err := quota.NewConfig(services, overrides, accessKeys)
	if err != nil { // every check above ran first; this is a safety net
		p.errorf(root, "", "%v", err)
		return nil
	}
	cfg := &Config{File: p.file, Quota: policy, Store: store, RLS: rls, ServiceQuotas: sq}
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

func (p *parser) service(n *yaml.Node, path string) (*quota.Service, *Autoscale) {
	var (
		preset, name, prefix, signing, upstream string
		throttle                                quota.Throttle
		hasThrottle                             bool
		route                                   *quota.Route
		scale                                   *Autoscale
		upstreamNode, routeNode, scaleNode      *yaml.Node
		categories                              []*quota.Category
		catNodes                                []*yaml.Node
		nameNode, categoriesNode                *yaml.Node
		ok                                      = true
	)
	set := map[string]bool{}
	fail := func() { ok = false }
	p.fields(n, path, map[string]func(k, v *yaml.Node, f string){
		"preset": func(_, v *yaml.Node, f string) {
			s, good := p.str(v, f)
			if !good {
				fail()
				return
			}
			if !slices.Contains(quota.PresetNames(), s) {
				p.errorf(v, f, "%v %q%s (have %s)", quota.ErrUnknownPreset, s, suggest.DidYouMean(s, quota.PresetNames()), strings.Join(quota.PresetNames(), ", "))
				fail()
				return
			}
			preset = s
		},
		"name": func(_, v *yaml.Node, f string) {
			nameNode = v
			set["name"] = true
			if s, good := p.name(v, f, namePattern, "service name"); good {
				name = s
			} else {
				fail()
			}
		},
		"target_prefix": func(_, v *yaml.Node, f string) {
			set["target_prefix"] = true
			if s, good := p.name(v, f, actionPattern, "target prefix"); good {
				prefix = s
			} else {
				fail()
			}
		},
		"signing_name": func(_, v *yaml.Node, f string) {
			set["signing_name"] = true
			if s, good := p.name(v, f, namePattern, "signing name"); good {
				signing = s
			} else {
				fail()
			}
		},
		"route": func(_, v *yaml.Node, f string) {
			routeNode = v
			r, good := p.route(v, f)
			if !good {
				fail()
			}
			route = r
		},
		"autoscale": func(_, v *yaml.Node, f string) {
			scaleNode = v
			a, good := p.autoscale(v, f)
			if !good {
				fail()
			}
			scale = a
		},
		"upstream": func(_, v *yaml.Node, f string) {
			upstreamNode = v
			s, good := p.str(v, f)
			if !good {
				fail()
				return
			}
			u, err := url.Parse(s)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				p.errorf(v, f, "%q is not an http:// or https:// URL", s)
				fail()
				return
			}
			upstream = s
		},
		"throttle": func(_, v *yaml.Node, f string) {
			set["throttle"] = true
			hasThrottle = true
			throttle = quota.Throttle{Message: "Rate exceeded", HTTPStatus: 400}
			p.fields(v, f, map[string]func(k, v *yaml.Node, f string){
				"code": func(_, v *yaml.Node, f string) {
					if s, good := p.name(v, f, actionPattern, "error code"); good {
						throttle.Code = s
					} else {
						fail()
					}
				},
				"message": func(_, v *yaml.Node, f string) {
					if s, good := p.str(v, f); good {
						throttle.Message = s
					} else {
						fail()
					}
				},
				"status": func(_, v *yaml.Node, f string) {
					st, good := p.integer(v, f)
					if good && (st < 400 || st > 499) {
						p.errorf(v, f, "status %d must be a 4xx", st)
						good = false
					}
					if !good {
						fail()
						return
					}
					throttle.HTTPStatus = int(st)
				},
			})
			if throttle.Code == "" {
				p.errorf(v, joinField(f, "code"), "missing")
				fail()
			}
		},
		"categories": func(_, v *yaml.Node, f string) {
			set["categories"] = true
			categoriesNode = v
			for i, cn := range p.list(v, f) {
				c := p.category(cn, fmt.Sprintf("%s[%d]", f, i))
				if c == nil {
					fail()
					continue
				}
				categories = append(categories, c)
				catNodes = append(catNodes, cn)
			}
		},
	})
	if n.Kind != yaml.MappingNode {
		return nil, nil
	}
	if upstreamNode != nil && scaleNode != nil {
		p.errorf(upstreamNode, joinField(path, "upstream"), "a service has an upstream or an autoscale pool, not both")
		ok = false
	}
	if routeNode != nil && scaleNode == nil {
		p.errorf(routeNode, joinField(path, "route"), "a route leads to the service's autoscale pool: add an autoscale section")
		ok = false
	}
	if preset != "" {
		for _, field := range []string{"name", "target_prefix", "signing_name", "throttle", "categories"} {
			if set[field] {
				p.errorf(n, joinField(path, field), "cannot be changed on preset %q (only upstream, route and autoscale can)", preset)
				ok = false
			}
		}
		if !ok {
			return nil, nil
		}
		s, _ := quota.Preset(preset) // known: checked above
		s.Upstream, s.Route, s.Autoscaled = upstream, route, scale != nil
		return s, scale
	}
	if nameNode == nil && ok {
		p.errorf(n, joinField(path, "name"), "missing: give a name or a preset")
		ok = false
	}
	if categoriesNode == nil && scaleNode == nil && ok {
		p.errorf(n, joinField(path, "categories"), "missing: a service needs at least one category, or an autoscale pool and a route")
		ok = false
	}
	if !hasThrottle {
		throttle = quota.Throttle{Code: "ThrottlingException", Message: "Rate exceeded", HTTPStatus: 400}
	}
	// An action in two categories, or a category name used twice.
	cats := map[string]bool{}
	actions := map[string]string{}
	for i, c := range categories {
		cf := fmt.Sprintf("%s.categories[%d]", path, i)
		if cats[c.Name] {
			p.errorf(catNodes[i], cf+".name", "category %q defined twice in service %s", c.Name, name)
			ok = false
		}
		cats[c.Name] = true
		for _, a := range c.Actions {
			if prev, dup := actions[a]; dup {
				p.errorf(catNodes[i], cf+".actions", "action %s is already in category %q of service %s", a, prev, name)
				ok = false
				continue
			}
			actions[a] = c.Name
		}
	}
	if !ok {
		return nil, nil
	}
	s, err := quota.NewService(name, categories)
	if err != nil {
		p.errorf(n, path, "%v", err)
		return nil, nil
	}
	s.TargetPrefix, s.SigningName, s.Throttle, s.Upstream = prefix, signing, throttle, upstream
	s.Route, s.Autoscaled = route, scale != nil
	if s.SigningName == "" {
		s.SigningName = name
	}
	return s, scale
}

func (p *parser) category(n *yaml.Node, path string) *quota.Category {
	var (
		c     quota.Category
		lf    limitFields
		ok    = true
		named bool
		acts  *yaml.Node
	)
	handlers := map[string]func(k, v *yaml.Node, f string){
		"name": func(_, v *yaml.Node, f string) {
			named = true
			if s, good := p.name(v, f, namePattern, "category name"); good {
				c.Name = s
			} else {
				ok = false
			}
		},
		"actions": func(_, v *yaml.Node, f string) {
			acts = v
			items := p.list(v, f)
			if v.Kind == yaml.SequenceNode && len(items) == 0 {
				p.errorf(v, f, "a category needs at least one action")
				ok = false
			}
			seen := map[string]bool{}
			for i, an := range items {
				a, good := p.name(an, fmt.Sprintf("%s[%d]", f, i), actionPattern, "action name")
				if !good {
					ok = false
					continue
				}
				if seen[a] {
					p.errorf(an, fmt.Sprintf("%s[%d]", f, i), "action %s listed twice", a)
					ok = false
					continue
				}
				seen[a] = true
				c.Actions = append(c.Actions, a)
			}
		},
	}
	p.limitHandlers(&lf, handlers)
	p.fields(n, path, handlers)
	if n.Kind != yaml.MappingNode {
		return nil
	}
	if !named {
		p.errorf(n, joinField(path, "name"), "missing")
		ok = false
	}
	if acts == nil {
		p.errorf(n, joinField(path, "actions"), "missing")
		ok = false
	}
	l, good := p.limit(n, path, &lf)
	if !ok || !good {
		return nil
	}
	c.Limit = l
	return &c
}

// override reads one entry of overrides; ok reports whether its service,
// account, region and category parsed (a bad limit is reported, not
// returned: the entry is still checked against the services).
func (p *parser) override(n *yaml.Node, path string) (o quota.Override, ok bool) {
	var lf limitFields
	ok = true
	required := map[string]bool{}
	text := func(dst *string, re *regexp.Regexp, what string) func(k, v *yaml.Node, f string) {
		return func(k, v *yaml.Node, f string) {
			required[k.Value] = true
			if s, good := p.name(v, f, re, what); good {
				*dst = s
			} else {
				ok = false
			}
		}
	}
	handlers := map[string]func(k, v *yaml.Node, f string){
		"service":  text(&o.Service, namePattern, "service name"),
		"account":  text(&o.Account, accountChars(), "account id"),
		"region":   text(&o.Region, namePattern, "region"),
		"category": text(&o.Category, namePattern, "category name"),
	}
	p.limitHandlers(&lf, handlers)
	p.fields(n, path, handlers)
	if n.Kind != yaml.MappingNode {
		return o, false
	}
	for _, f := range []string{"service", "account", "category"} {
		if !required[f] {
			p.errorf(n, joinField(path, f), "missing")
			ok = false
		}
	}
	// A bad limit is an error of its own, already recorded; the entry's
	// names are still checked against the services (ok), so one run
	// reports a typo of the category beside a bad capacity.
	o.Limit, _ = p.limit(n, path, &lf)
	return o, ok
}
