// Package quota is tollgate's policy model: which bucket a request draws
// from, and how big that bucket is.
//
// A [Service] (ECS, Cloud Map, or one of your own) groups its API actions
// into categories; every action of a category draws from one token bucket
// per account and region, so DescribeClusters and ListClusters share the
// ECS "cluster-read" bucket. A [Key] names one such bucket. A [Config] holds
// the services, the per-account and per-(account, region) overrides that
// raise a category's limits ("quota increases"), and the access keys that
// belong to one account.
//
// Configs come from the built-in presets ([Preset]: "ecs", "cloudmap",
// "servicequotas", and "ec2", "sts", "ssm", "kms", "secretsmanager" from
// AWS's published throttling tables, each naming its page in Source),
// from [NewConfig], or from a YAML file through package config, which
// owns the file format and names the file, line and field of every
// problem. quota owns the policy model only: it reads no file and knows
// nothing of the store, the pools or the Envoy rate limit service.
package quota

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/bucket"
)

// Throttle is how a service says "throttled" on the wire.
type Throttle struct {
	// Code is the error code, in exact case: "ThrottlingException".
	Code string
	// Message is the error message: "Rate exceeded".
	Message string
	// HTTPStatus is the status of a throttled response: 400 for AWS JSON
	// services.
	HTTPStatus int
}

// Category is a group of actions that share one bucket per account and
// region.
type Category struct {
	// Name identifies the category within its service: "cluster-read".
	Name string
	// Actions are the API actions that draw from the category's bucket.
	Actions []string
	// Limit is the default capacity (burst) and refill (sustained rate).
	Limit bucket.Limit
	// Throttle, when set, is the error a throttled request of this
	// category gets in place of its service's Throttle: Cloud Map's
	// control plane answers ThrottlingException, its Discover operations
	// RequestLimitExceeded.
	Throttle *Throttle
	// DrawnBy says which requests take from a category that no action
	// names, and how many tokens: "RunTask on Fargate, one token per task
	// launched On-Demand". Such a category is reached through its
	// service's charging rules ([Service.Charges]); tables print DrawnBy
	// in place of the actions.
	DrawnBy string
	// PerAction says each action of the category has a bucket of its
	// own, of the category's size, rather than one bucket shared by all:
	// EC2's request rate limiting, where "non-mutating" sizes the bucket
	// of every Describe* action separately. Such a bucket's key names the
	// category and the action: "non-mutating/DescribeHosts".
	PerAction bool
	// Source says where the category's numbers come from when that is
	// not its service's Source: "inferred: …" for a category AWS's
	// documentation does not list.
	Source string
}

// Service is an API whose actions are throttled together.
type Service struct {
	// Name identifies the service in keys and configs: "ecs".
	Name string
	// TargetPrefix is the AWS JSON X-Amz-Target prefix, e.g.
	// "AmazonEC2ContainerServiceV20141113"; empty for services reached
	// only through the native API.
	TargetPrefix string
	// SigningName is the SigV4 service name of the credential scope, e.g.
	// "ecs" or "servicediscovery".
	SigningName string
	// Throttle is the error a throttled request gets.
	Throttle Throttle
	// Upstream is the base URL allowed requests are proxied to; empty
	// means answer them locally.
	Upstream string
	// Categories are the service's categories, in table order; none for
	// a service reached only through its Route.
	Categories []*Category
	// Route sends matching HTTP requests straight to the service's
	// autoscaled pool; nil for none.
	Route *Route
	// Autoscaled says the service's instances are run and scaled by
	// tollgate (how is the config's autoscale section, package config),
	// and that they are its upstream in place of Upstream.
	Autoscaled bool
	// Source names the published AWS documentation the service's table
	// is taken from; empty for a service of one's own.
	Source string
	// DefaultCategory names the category of an operation the table does
	// not list ([Service.CategoryOrDefault]): with an Upstream, serve
	// passes such an operation through under it, so a table stays
	// forward compatible as AWS adds operations. Empty, or without an
	// upstream, such an operation is refused (UnknownOperationException);
	// replay counts it as an unknown action, so a report shows what the
	// table lacks.
	DefaultCategory string
	// Prefixes sort operations the table does not list by the start of
	// their name, first match wins: EC2's "Describe*, List*, Search*,
	// Get*" are non-mutating, every other action mutating.
	Prefixes []Prefix
	// ThrottleCodes are the error codes, beside Throttle.Code and the
	// categories' own, that the service's logs give a throttled call:
	// EC2 logs "Client.RequestLimitExceeded" in CloudTrail.
	ThrottleCodes []string

	byAction map[string]*Category
	byName   map[string]*Category
	aliases  map[string]string  // another spelling of an action → the action
	chargers map[string]charger // actions whose cost depends on the body
}

// Prefix sends the operations whose names start with Prefix ("" matches
// every name) to the category named Category.
type Prefix struct {
	Prefix   string
	Category string
}

// NewService returns a service with the given categories, indexed for
// lookups. It fails if two categories share a name or an action.
func NewService(name string, categories []*Category) (*Service, error) {
	s := &Service{Name: name, Categories: categories}
	if err := s.index(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Service) index() error {
	s.byAction = make(map[string]*Category)
	s.byName = make(map[string]*Category, len(s.Categories))
	for _, c := range s.Categories {
		if _, dup := s.byName[c.Name]; dup {
			return fmt.Errorf("service %s: category %q defined twice", s.Name, c.Name)
		}
		s.byName[c.Name] = c
		for _, a := range c.Actions {
			if prev, dup := s.byAction[a]; dup {
				return fmt.Errorf("service %s: action %s is in categories %q and %q", s.Name, a, prev.Name, c.Name)
			}
			s.byAction[a] = c
		}
	}
	for alias, a := range s.aliases {
		if _, dup := s.byAction[alias]; dup {
			return fmt.Errorf("service %s: alias %s is also an action", s.Name, alias)
		}
		if _, ok := s.byAction[a]; !ok {
			return fmt.Errorf("service %s: alias %s of %s, which no category lists", s.Name, alias, a)
		}
	}
	for _, p := range s.Prefixes {
		if _, ok := s.byName[p.Category]; !ok {
			return fmt.Errorf("service %s: prefix %q sends operations to category %q, which is not defined", s.Name, p.Prefix, p.Category)
		}
	}
	if d := s.DefaultCategory; d != "" {
		if _, ok := s.byName[d]; !ok {
			return fmt.Errorf("service %s: default category %q is not defined", s.Name, d)
		}
	}
	return nil
}

// ThrottleOf returns the error a throttled request of cat gets: cat's own
// Throttle if it has one, else the service's.
func (s *Service) ThrottleOf(cat *Category) Throttle {
	if cat != nil && cat.Throttle != nil {
		return *cat.Throttle
	}
	return s.Throttle
}

// CategoryOf returns the category of an action: the one that lists it
// (or the action an alias spells otherwise, as ECS's seed table spelled
// UpdateContainerInstancesState with an s), else the first of
// [Service.Prefixes] its name starts with.
func (s *Service) CategoryOf(action string) (*Category, bool) {
	if c, ok := s.byAction[action]; ok {
		return c, true
	}
	if a, ok := s.aliases[action]; ok {
		return s.byAction[a], true
	}
	for _, p := range s.Prefixes {
		if strings.HasPrefix(action, p.Prefix) {
			return s.byName[p.Category], true
		}
	}
	return nil, false
}

// CategoryOrDefault returns the category of an action, or, for an
// operation the table does not know, the service's DefaultCategory when
// it has one.
func (s *Service) CategoryOrDefault(action string) (*Category, bool) {
	if c, ok := s.CategoryOf(action); ok {
		return c, true
	}
	if s.DefaultCategory == "" {
		return nil, false
	}
	c, ok := s.byName[s.DefaultCategory]
	return c, ok
}

// Canonical returns the spelling of action the service's table uses:
// the action an alias stands for, else action itself.
func (s *Service) Canonical(action string) string {
	if a, ok := s.aliases[action]; ok {
		return a
	}
	return action
}

// Aliases returns the other spellings the service accepts for its
// actions, each mapped to the action.
func (s *Service) Aliases() map[string]string { return maps.Clone(s.aliases) }

// BucketName returns the category part of the key of the bucket a call
// of action in cat takes from: cat's name, or, for a PerAction category,
// its name and the action ("non-mutating/DescribeHosts").
func (s *Service) BucketName(cat *Category, action string) string {
	if !cat.PerAction {
		return cat.Name
	}
	return cat.Name + "/" + s.Canonical(action)
}

// CategoryNamed returns the category with the given name, or the
// PerAction category of a bucket name such as
// "non-mutating/DescribeHosts".
func (s *Service) CategoryNamed(name string) (*Category, bool) {
	if c, ok := s.byName[name]; ok {
		return c, true
	}
	cat, action, ok := strings.Cut(name, "/")
	if !ok {
		return nil, false
	}
	c, ok := s.byName[cat]
	if !ok || !c.PerAction {
		return nil, false
	}
	if got, ok := s.CategoryOf(action); !ok || got != c {
		return nil, false
	}
	return c, true
}

// IsThrottleCode reports whether code is an error code the service
// answers or logs for a throttled call: its Throttle's, a category's, or
// one of its ThrottleCodes.
func (s *Service) IsThrottleCode(code string) bool {
	if code == s.Throttle.Code || slices.Contains(s.ThrottleCodes, code) {
		return true
	}
	for _, c := range s.Categories {
		if c.Throttle != nil && c.Throttle.Code == code {
			return true
		}
	}
	return false
}

// Key names one bucket: a category of a service, for one account in one
// region.
type Key struct {
	Service  string // the service's name: "ecs"
	Account  string // the account id (or the access key id when unmapped)
	Region   string // the AWS region: "us-east-1"
	Category string // the category's name: "cluster-read"
}

// String returns the key's canonical form,
// "{service/account}:region:category", e.g.
// "{ecs/123456789012}:us-east-1:cluster-read". The braces are a Redis
// Cluster hash tag: every bucket of one account of a service lives on one
// shard.
func (k Key) String() string {
	return string(k.AppendTo(make([]byte, 0, len(k.Service)+len(k.Account)+len(k.Region)+len(k.Category)+5)))
}

// AppendTo appends the key's canonical form (see [Key.String]) to b.
func (k Key) AppendTo(b []byte) []byte {
	b = append(b, '{')
	b = append(b, k.Service...)
	b = append(b, '/')
	b = append(b, k.Account...)
	b = append(b, "}:"...)
	b = append(b, k.Region...)
	b = append(b, ':')
	return append(b, k.Category...)
}

// Override raises (or lowers) one category's limit for one account, in one
// region or, with an empty Region, in every region.
type Override struct {
	Service  string       // the service's name
	Account  string       // the account the increase is for
	Region   string       // one region, or "" for every region
	Category string       // the category's name
	Limit    bucket.Limit // the limit that replaces the category's default
}

type overrideKey struct{ service, account, region, category string }

// Config is a complete, validated throttling policy. It is immutable once
// built, so one value can serve many goroutines; a reload builds a new one.
type Config struct {
	services  []*Service
	byName    map[string]*Service
	byPrefix  map[string]*Service
	overrides map[overrideKey]bucket.Limit
	overList  []Override
	accounts  map[string]string
	regions   *awsjson.Regions // nil: every AWS region
}

// NewConfig builds a config from services, overrides and an access-key →
// account map (which may be nil). It reports the first inconsistency;
// package config parses a YAML file, with errors that give line numbers.
func NewConfig(services []*Service, overrides []Override, accessKeys map[string]string) (*Config, error) {
	c := &Config{
		byName:    make(map[string]*Service, len(services)),
		byPrefix:  make(map[string]*Service, len(services)),
		overrides: make(map[overrideKey]bucket.Limit, len(overrides)),
		accounts:  make(map[string]string, len(accessKeys)),
	}
	for _, s := range services {
		if s.byAction == nil {
			if err := s.index(); err != nil {
				return nil, err
			}
		}
		if _, dup := c.byName[s.Name]; dup {
			return nil, fmt.Errorf("service %q defined twice", s.Name)
		}
		c.byName[s.Name] = s
		if s.TargetPrefix != "" {
			if prev, dup := c.byPrefix[s.TargetPrefix]; dup {
				return nil, fmt.Errorf("services %q and %q share target prefix %q", prev.Name, s.Name, s.TargetPrefix)
			}
			c.byPrefix[s.TargetPrefix] = s
		}
		c.services = append(c.services, s)
	}
	for _, o := range overrides {
		s, ok := c.byName[o.Service]
		if !ok {
			return nil, fmt.Errorf("override for unknown service %q", o.Service)
		}
		if _, ok := s.CategoryNamed(o.Category); !ok {
			return nil, fmt.Errorf("override for unknown category %q of service %q", o.Category, o.Service)
		}
		k := overrideKey{o.Service, o.Account, o.Region, o.Category}
		if _, dup := c.overrides[k]; dup {
			return nil, fmt.Errorf("override for %s/%s/%s/%s given twice", o.Service, o.Account, o.Region, o.Category)
		}
		c.overrides[k] = o.Limit
		c.overList = append(c.overList, o)
	}
	for k, v := range accessKeys {
		c.accounts[k] = v
	}
	return c, nil
}

// Services returns the config's services in the order they were given.
func (c *Config) Services() []*Service { return c.services }

// Service returns the service with the given name.
func (c *Config) Service(name string) (*Service, bool) {
	s, ok := c.byName[name]
	return s, ok
}

// ServiceByTargetPrefix returns the service whose X-Amz-Target prefix is
// prefix.
func (c *Config) ServiceByTargetPrefix(prefix string) (*Service, bool) {
	s, ok := c.byPrefix[prefix]
	return s, ok
}

// Overrides returns the quota increases in the order they were given.
func (c *Config) Overrides() []Override { return c.overList }

// AccessKeys returns how many access keys the config maps to accounts.
func (c *Config) AccessKeys() int { return len(c.accounts) }

// Account returns the account an access key belongs to: the mapped account
// when the config maps the key, else the key itself.
func (c *Config) Account(accessKeyID string) string {
	if a, ok := c.accounts[accessKeyID]; ok {
		return a
	}
	return accessKeyID
}

// Limit returns the limit of the bucket k: an override for k's account and
// region if there is one, else one for its account in every region, else
// the category's default. ok is false if k's service or category is unknown.
func (c *Config) Limit(k Key) (limit bucket.Limit, ok bool) {
	s, ok := c.byName[k.Service]
	if !ok {
		return bucket.Limit{}, false
	}
	cat, ok := s.CategoryNamed(k.Category)
	if !ok {
		return bucket.Limit{}, false
	}
	return c.limitOf(cat, k), true
}

// limitOf returns the limit of k, a bucket of cat: an override of k's
// own bucket name, then, for a PerAction bucket, one of its category,
// else the category's default.
func (c *Config) limitOf(cat *Category, k Key) bucket.Limit {
	if len(c.overrides) != 0 {
		if l, ok := c.override(k.Service, k.Account, k.Region, k.Category); ok {
			return l
		}
		if k.Category != cat.Name {
			if l, ok := c.override(k.Service, k.Account, k.Region, cat.Name); ok {
				return l
			}
		}
	}
	return cat.Limit
}

func (c *Config) override(service, account, region, category string) (bucket.Limit, bool) {
	if l, ok := c.overrides[overrideKey{service, account, region, category}]; ok {
		return l, true
	}
	l, ok := c.overrides[overrideKey{service, account, "", category}]
	return l, ok
}

// Resolve maps a request — an action of a service, by an account in a
// region — to its bucket key and limit.
func (c *Config) Resolve(service, account, region, action string) (Key, bucket.Limit, error) {
	s, ok := c.byName[service]
	if !ok {
		return Key{}, bucket.Limit{}, fmt.Errorf("%w: %q", ErrUnknownService, service)
	}
	cat, ok := s.CategoryOf(action)
	if !ok {
		return Key{}, bucket.Limit{}, fmt.Errorf("%w: %q is not an action of %s", ErrUnknownAction, action, service)
	}
	k := Key{Service: service, Account: account, Region: region, Category: s.BucketName(cat, action)}
	return k, c.limitOf(cat, k), nil
}

// ValidAccount reports whether s can be an account in a bucket key: 1 to
// 128 letters, digits, '.', '_' or '-' (nothing that could be mistaken for
// the key's separators or hash tag).
func ValidAccount(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// MapsKey reports whether the config maps accessKeyID to an account.
func (c *Config) MapsKey(accessKeyID string) bool {
	_, ok := c.accounts[accessKeyID]
	return ok
}
