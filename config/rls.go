package config

import (
	"net"
	"path/filepath"
	"strconv"

	"go.yaml.in/yaml/v3"
	"golang.org/x/net/http/httpguts"
)

// RLS is the rls section of a config file: how `tollgate serve` runs
// Envoy's rate limit service (gRPC ShouldRateLimit) from envoy ratelimit's
// own config directory. The zero RLS sets nothing; command-line flags win
// over every field.
//
//	rls:
//	  config_dir: ratelimit/config   # envoy ratelimit's *.yaml; relative to this file
//	  grpc_listen: 127.0.0.1:8081    # envoy ratelimit's GRPC_PORT default
//	  merge_domains: false           # MERGE_DOMAIN_CONFIG
//	  shadow_mode: false             # SHADOW_MODE
//	  response_headers: true         # LIMIT_RESPONSE_HEADERS_ENABLED
//	  limit_header: RateLimit-Limit          # LIMIT_LIMIT_HEADER
//	  remaining_header: RateLimit-Remaining  # LIMIT_REMAINING_HEADER
//	  reset_header: RateLimit-Reset          # LIMIT_RESET_HEADER
//	  tls:                           # GRPC_SERVER_TLS_CERT, GRPC_SERVER_TLS_KEY
//	    cert_file: tls/tls.crt       # relative to this file
//	    key_file: tls/tls.key
//	    client_ca_file: tls/ca.crt   # GRPC_CLIENT_TLS_CACERT: mTLS
type RLS struct {
	// ConfigDir is envoy ratelimit's config directory, absolute (a
	// relative config_dir is taken from the config file's directory); ""
	// when the file names none.
	ConfigDir string
	// GRPCListen is the gRPC listen address (host:port); "" for the
	// default.
	GRPCListen string
	// MergeDomains lets several files add to one domain.
	MergeDomains bool
	// ShadowMode answers OK to every request after deciding and counting
	// it.
	ShadowMode bool
	// ResponseHeaders adds the limit, remaining and reset headers to
	// every answer.
	ResponseHeaders bool
	// LimitHeader, RemainingHeader and ResetHeader name those headers;
	// "" for the defaults (envoy ratelimit's: RateLimit-Limit,
	// RateLimit-Remaining, RateLimit-Reset).
	LimitHeader, RemainingHeader, ResetHeader string
	// TLS is the gRPC listener's certificate, key and, for mutual TLS,
	// client CA; zero for plaintext (see [TLS]).
	TLS TLS
}

func (p *parser) rls(n *yaml.Node, path string) RLS {
	var r RLS
	boolean := func(dst *bool) func(_, v *yaml.Node, f string) {
		return func(_, v *yaml.Node, f string) {
			b, err := strconv.ParseBool(v.Value)
			if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" || err != nil {
				p.errorf(v, f, "want true or false, got %s", kindName(v))
				return
			}
			*dst = b
		}
	}
	header := func(dst *string) func(_, v *yaml.Node, f string) {
		return func(_, v *yaml.Node, f string) {
			s, ok := p.str(v, f)
			if !ok {
				return
			}
			if !httpguts.ValidHeaderFieldName(s) {
				p.errorf(v, f, "%q is not a valid HTTP header name", s)
				return
			}
			*dst = s
		}
	}
	p.fields(n, path, map[string]func(_, v *yaml.Node, f string){
		"config_dir": func(_, v *yaml.Node, f string) {
			s, ok := p.str(v, f)
			if !ok {
				return
			}
			if s == "" {
				p.errorf(v, f, "empty: name envoy ratelimit's config directory, or leave config_dir out")
				return
			}
			if !filepath.IsAbs(s) {
				base, err := filepath.Abs(filepath.Dir(p.file))
				if err != nil {
					base = filepath.Dir(p.file)
				}
				s = filepath.Join(base, s)
			}
			r.ConfigDir = s
		},
		"grpc_listen": func(_, v *yaml.Node, f string) {
			s, ok := p.str(v, f)
			if !ok {
				return
			}
			if _, port, err := net.SplitHostPort(s); err != nil || port == "" {
				p.errorf(v, f, "%q is not a host:port address such as 127.0.0.1:8081", s)
				return
			}
			r.GRPCListen = s
		},
		"merge_domains":    boolean(&r.MergeDomains),
		"shadow_mode":      boolean(&r.ShadowMode),
		"response_headers": boolean(&r.ResponseHeaders),
		"limit_header":     header(&r.LimitHeader),
		"remaining_header": header(&r.RemainingHeader),
		"reset_header":     header(&r.ResetHeader),
		"tls":              func(_, v *yaml.Node, f string) { r.TLS = p.tls(v, f, "client_ca_file", true) },
	})
	return r
}
