package redis

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// ErrInvalidURL is wrapped by the errors of [NewClient]. The errors never
// repeat the URL, which may hold a password.
var ErrInvalidURL = errors.New("redis: invalid store URL")

// clientConfig is a parsed store URL: exactly one of its fields is set.
type clientConfig struct {
	single   *goredis.Options
	cluster  *goredis.ClusterOptions
	failover *goredis.FailoverOptions
}

// NewClient returns a go-redis client for a store URL, in the forms go-redis
// parses:
//
//	redis://[[user]:password@]host[:port][/db][?option=value…]
//	rediss://…                       the same over TLS
//	unix://[[user]:password@]/path/to/redis.sock[?db=N…]
//	redis+cluster://[[user]:password@]host:port[?addr=host:port…]
//	redis+sentinel://[[user]:password@]host:port[/db]?master_name=name[&addr=host:port…]
//
// rediss+cluster and rediss+sentinel are the TLS forms. A redis:// or
// rediss:// URL with a master_name option is a Sentinel URL too, and one
// with addr options a Cluster URL. Options are go-redis's, in snake case
// (dial_timeout=1s, pool_size=50, …; see [goredis.ParseURL],
// [goredis.ParseClusterURL] and [goredis.ParseFailoverURL]). In the Sentinel
// form the user and password are the Sentinels'; the data nodes' are the
// username and password options. Redis Cluster has only database 0.
//
// The client honours context deadlines (ContextTimeoutEnabled), which the
// store's per-call timeout relies on. Creating it does not connect. The
// caller closes it after closing the stores that use it.
func NewClient(rawURL string) (goredis.UniversalClient, error) {
	return NewClientTLS(rawURL, nil)
}

// NewClientTLS is [NewClient] with the TLS configuration of a TLS URL's
// connections made by tlsConfig, from the server name the URL gives (its
// host): a CA other than the system roots, or a client certificate for
// Redis's tls-auth-clients. It replaces go-redis's configuration (the
// system roots, no client certificate). A nil tlsConfig is NewClient. The
// URL must be a TLS form (rediss://, rediss+cluster://,
// rediss+sentinel://) without skip_verify, else the error wraps
// ErrInvalidURL.
func NewClientTLS(rawURL string, tlsConfig func(serverName string) *tls.Config) (goredis.UniversalClient, error) {
	cfg, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if tlsConfig != nil {
		if err := cfg.setTLS(tlsConfig); err != nil {
			return nil, err
		}
	}
	switch {
	case cfg.cluster != nil:
		return goredis.NewClusterClient(cfg.cluster), nil
	case cfg.failover != nil:
		return goredis.NewFailoverClient(cfg.failover), nil
	default:
		return goredis.NewClient(cfg.single), nil
	}
}

func parseURL(rawURL string) (clientConfig, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL
		}
		return clientConfig{}, fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	scheme, kind, _ := strings.Cut(u.Scheme, "+")
	q := u.Query()
	switch scheme {
	case "redis", "rediss":
	case "unix":
		if kind != "" {
			return clientConfig{}, fmt.Errorf("%w: scheme %q: unix sockets are single servers", ErrInvalidURL, u.Scheme)
		}
	default:
		return clientConfig{}, fmt.Errorf("%w: scheme %q: want redis, rediss, unix, redis+cluster or redis+sentinel", ErrInvalidURL, u.Scheme)
	}
	if _, rest, _ := strings.Cut(rawURL, ":"); scheme != "unix" && !strings.HasPrefix(rest, "//") {
		// redis:/host or redis:host: go-redis would read the host as a
		// database number, or as nothing.
		return clientConfig{}, fmt.Errorf("%w: malformed URL (no \"//\" after \"%s:\"): want %s", ErrInvalidURL, u.Scheme, urlForm(u.Scheme, kind))
	}
	if kind == "" && scheme != "unix" {
		switch {
		case q.Has("master_name"):
			kind = "sentinel"
		case q.Has("addr"):
			kind = "cluster"
		}
	}
	plain := *u
	plain.Scheme = scheme
	switch kind {
	case "":
		o, err := goredis.ParseURL(plain.String())
		if err != nil {
			return clientConfig{}, fmt.Errorf("%w: %w", ErrInvalidURL, err)
		}
		o.ContextTimeoutEnabled = true
		return clientConfig{single: o}, nil
	case "cluster":
		if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
			return clientConfig{}, fmt.Errorf("%w: database %q: Redis Cluster has only database 0", ErrInvalidURL, p)
		}
		plain.Path, plain.RawPath = "", ""
		o, err := goredis.ParseClusterURL(plain.String())
		if err != nil {
			return clientConfig{}, fmt.Errorf("%w: %w", ErrInvalidURL, err)
		}
		o.ContextTimeoutEnabled = true
		return clientConfig{cluster: o}, nil
	case "sentinel":
		o, err := goredis.ParseFailoverURL(plain.String())
		if err != nil {
			return clientConfig{}, fmt.Errorf("%w: %w", ErrInvalidURL, err)
		}
		if o.MasterName == "" {
			return clientConfig{}, fmt.Errorf("%w: a Sentinel URL needs the master_name option", ErrInvalidURL)
		}
		if !q.Has("context_timeout_enabled") {
			o.ContextTimeoutEnabled = true
		}
		return clientConfig{failover: o}, nil
	}
	return clientConfig{}, fmt.Errorf("%w: scheme %q: want redis, rediss, unix, redis+cluster or redis+sentinel", ErrInvalidURL, u.Scheme)
}

// urlForm is the shape of a store URL of scheme (kind is its part after
// a "+"), for an error about a malformed one.
func urlForm(scheme, kind string) string {
	switch kind {
	case "cluster":
		return scheme + "://host:port (e.g. " + scheme + "://127.0.0.1:7000)"
	case "sentinel":
		return scheme + "://host:port/db?master_name=NAME (e.g. " + scheme + "://127.0.0.1:26379/0?master_name=mymaster)"
	}
	return scheme + "://host:port/db (e.g. " + scheme + "://127.0.0.1:6379/0)"
}

// setTLS replaces the parsed URL's TLS configuration by one made for its
// server name.
func (c clientConfig) setTLS(make func(serverName string) *tls.Config) error {
	var dst **tls.Config
	switch {
	case c.cluster != nil:
		dst = &c.cluster.TLSConfig
	case c.failover != nil:
		dst = &c.failover.TLSConfig
	default:
		dst = &c.single.TLSConfig
	}
	if *dst == nil {
		return fmt.Errorf("%w: TLS files are given, but the URL is not a TLS URL: use rediss://, rediss+cluster:// or rediss+sentinel://", ErrInvalidURL)
	}
	if (*dst).InsecureSkipVerify {
		return fmt.Errorf("%w: skip_verify=true turns off the verification TLS files are given for: give one or the other", ErrInvalidURL)
	}
	*dst = make((*dst).ServerName)
	return nil
}
