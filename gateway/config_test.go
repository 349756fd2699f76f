package gateway

import (
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/quota"
)

// parseConfig parses a config file's text, as tollgate serve reads it,
// and returns its throttling policy, which is what the gateway serves.
func parseConfig(file string, data []byte) (*quota.Config, error) {
	c, err := config.Parse(file, data)
	if err != nil {
		return nil, err
	}
	return c.Quota, nil
}
