package quota

import "github.com/tollgate/tollgate/awsjson"

// WithRegions returns c serving the regions r (nil: every region of
// AWS's partitions, [awsjson.AWSRegions]). c is not changed.
func (c *Config) WithRegions(r *awsjson.Regions) *Config {
	cc := *c
	cc.regions = r
	return &cc
}

// Regions returns the regions the config serves: a request for any other
// takes no token and reaches no API. Never nil.
func (c *Config) Regions() *awsjson.Regions {
	if c.regions == nil {
		return awsjson.AWSRegions()
	}
	return c.regions
}

// ServesRegion reports whether the config serves region.
func (c *Config) ServesRegion(region string) bool { return c.regions.Serves(region) }
