package servicequotas

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/quota"
)

// Kind is which half of a category's token bucket a quota is.
type Kind string

// The two quotas of every category.
const (
	// Burst is the bucket's capacity: how many requests an account can
	// make at once in a region. Unit None.
	Burst Kind = "burst"
	// Rate is the bucket's refill: requests per second sustained. Unit
	// None, Period 1 SECOND.
	Rate Kind = "rate"
)

// Quota is one quota of the catalog: one half of one category's bucket.
type Quota struct {
	ServiceCode string  // the service's config name, '_' written '-': "ecs"
	ServiceName string  // readable: "Amazon ECS" for the presets, else the name
	Code        string  // "L-" and 8 hex digits, see [QuotaCode]
	Name        string  // "cluster-read burst"
	Description string  // at most 350 bytes, as the model allows
	Category    string  // the category's name in the config
	Kind        Kind    // Burst or Rate
	Default     float64 // the category's default capacity or refill per second
}

// QuotaCode derives a quota's code: "L-" and the first 4 bytes of
// SHA-256("tollgate/" + service + "/" + category + "/" + kind) as upper
// case hex, so that a category keeps its codes across releases, configs
// and nodes, and a renamed category gets new ones. For example ECS's
// cluster-read burst is QuotaCode("ecs", "cluster-read", Burst).
func QuotaCode(service, category string, kind Kind) string {
	sum := sha256.Sum256([]byte("tollgate/" + service + "/" + category + "/" + string(kind)))
	return "L-" + strings.ToUpper(hex.EncodeToString(sum[:4]))
}

// serviceNames are the readable names of the presets, as AWS writes them.
var serviceNames = map[string]string{
	"ecs":           "Amazon Elastic Container Service (Amazon ECS)",
	"cloudmap":      "AWS Cloud Map",
	"servicequotas": "Service Quotas",
}

// ServiceInfo is a service of the catalog.
type ServiceInfo struct {
	Code, Name, Config string // Config is the service's name in the config
}

// Catalog is every quota of one config, in the config's order: services,
// their categories, burst before rate. It is immutable.
type Catalog struct {
	services []ServiceInfo
	quotas   map[string][]Quota // by service code
	byCode   map[string]map[string]*Quota
	config   map[string]string // service code -> config name
	cfg      *quota.Config
}

// NewCatalog builds the catalog of cfg: every service with categories
// (presets and user-defined services alike) gets two quotas per category.
// It fails if two quotas' codes collide (a 1 in 4 billion chance per
// pair; rename a category).
func NewCatalog(cfg *quota.Config) (*Catalog, error) {
	c := &Catalog{quotas: map[string][]Quota{}, byCode: map[string]map[string]*Quota{}, config: map[string]string{}, cfg: cfg}
	seen := map[string]string{}
	for _, s := range cfg.Services() {
		if len(s.Categories) == 0 {
			continue
		}
		code := strings.ReplaceAll(s.Name, "_", "-")
		if prev, dup := c.config[code]; dup {
			return nil, fmt.Errorf("servicequotas: services %q and %q have the same service code %q", prev, s.Name, code)
		}
		name := serviceNames[s.Name]
		if name == "" {
			name = s.Name
		}
		c.services = append(c.services, ServiceInfo{Code: code, Name: name, Config: s.Name})
		c.config[code] = s.Name
		qs := make([]Quota, 0, 2*len(s.Categories))
		for _, cat := range s.Categories {
			for _, k := range []Kind{Burst, Rate} {
				q := Quota{ServiceCode: code, ServiceName: name, Category: cat.Name, Kind: k,
					Code: QuotaCode(s.Name, cat.Name, k)}
				if prev, dup := seen[q.Code]; dup {
					return nil, fmt.Errorf("servicequotas: quota code %s of %s/%s/%s collides with %s", q.Code, s.Name, cat.Name, k, prev)
				}
				seen[q.Code] = s.Name + "/" + cat.Name + "/" + string(k)
				q.Name, q.Description, q.Default = describe(cat, k)
				qs = append(qs, q)
			}
		}
		c.quotas[code] = qs
		idx := make(map[string]*Quota, len(qs))
		for i := range qs {
			idx[qs[i].Code] = &qs[i]
		}
		c.byCode[code] = idx
	}
	return c, nil
}

func describe(cat *quota.Category, k Kind) (name, desc string, def float64) {
	actions := strings.Join(cat.Actions, ", ")
	if len(actions) > 200 {
		actions = actions[:strings.LastIndex(actions[:200], ",")] + ", …"
	}
	what, verb := cat.Name+" requests ("+actions+")", " make"
	if len(cat.Actions) == 0 && cat.DrawnBy != "" {
		// A bucket no action names (Fargate's): its tokens are what
		// DrawnBy says, tasks launched or calls.
		what, verb = cat.Name+" tokens ("+cat.DrawnBy+")", " take"
	}
	if k == Burst {
		return cat.Name + " burst",
			"The maximum number of " + what + " an account can" + verb + " at once in this Region: the capacity of its token bucket.",
			float64(cat.Limit.Capacity())
	}
	return cat.Name + " rate",
		"The number of " + what + " per second an account can sustain in this Region: the refill of its token bucket.",
		cat.Limit.RefillPerSecond()
}

// Services returns the catalog's services in config order.
func (c *Catalog) Services() []ServiceInfo { return c.services }

// Quotas returns a service's quotas, or false for an unknown service code.
func (c *Catalog) Quotas(serviceCode string) ([]Quota, bool) {
	q, ok := c.quotas[serviceCode]
	return q, ok
}

// Quota returns one quota.
func (c *Catalog) Quota(serviceCode, quotaCode string) (*Quota, bool) {
	q, ok := c.byCode[serviceCode][quotaCode]
	return q, ok
}

// Config returns the config the catalog was built from.
func (c *Catalog) Config() *quota.Config { return c.cfg }

// configName is the config's name of a service code.
func (c *Catalog) configName(serviceCode string) string { return c.config[serviceCode] }

// Current is the value of q for a bucket key as the config alone has it
// (default or the file's override).
func (c *Catalog) configValue(q *Quota, account, region string) float64 {
	l, ok := c.cfg.Limit(quota.Key{Service: c.configName(q.ServiceCode), Account: account, Region: region, Category: q.Category})
	if !ok {
		return q.Default
	}
	return valueOf(l, q.Kind)
}

func valueOf(l bucket.Limit, k Kind) float64 {
	if k == Burst {
		return float64(l.Capacity())
	}
	return l.RefillPerSecond()
}

// formatValue writes a quota value as the table and messages show it.
func formatValue(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func sortApplied(a []Applied) {
	slices.SortFunc(a, func(x, y Applied) int {
		return cmp.Or(cmp.Compare(x.Account, y.Account), cmp.Compare(x.Region, y.Region),
			cmp.Compare(x.ServiceCode, y.ServiceCode), cmp.Compare(x.QuotaCode, y.QuotaCode))
	})
}
