package config

import (
	"path/filepath"

	"go.yaml.in/yaml/v3"
)

// TLS names the PEM files of one TLS endpoint, as the tls subsection of
// the rls and store sections gives them. Relative paths are taken from
// the config file's directory. The zero TLS is plaintext.
//
//	rls:
//	  tls:                           # the gRPC listener
//	    cert_file: tls/tls.crt       # certificate chain, leaf first
//	    key_file: tls/tls.key
//	    client_ca_file: tls/ca.crt   # optional: mTLS, clients need a certificate it signed
//	store:
//	  url: rediss://redis.internal:6380/0
//	  tls:                           # the Redis connection (a rediss:// URL)
//	    ca_file: tls/redis-ca.crt    # optional: the CA of Redis's certificate; default: system roots
//	    cert_file: tls/client.crt    # optional: a client certificate, for Redis's tls-auth-clients
//	    key_file: tls/client.key
//
// The files are read when tollgate starts, and again whenever they change.
type TLS struct {
	// CertFile and KeyFile are the certificate chain and its key: both
	// or neither.
	CertFile, KeyFile string
	// CAFile is a CA bundle: on a listener (client_ca_file) the CAs a
	// client's certificate must chain to, which makes clients present
	// one; on the store (ca_file) the CAs of Redis's certificate.
	CAFile string
}

// IsZero reports whether t names no file.
func (t TLS) IsZero() bool { return t == TLS{} }

// tls reads a tls subsection; caKey is the CA file's field name
// (client_ca_file on a listener, ca_file on the store), and needCert says
// the endpoint cannot do without a certificate (a listener).
func (p *parser) tls(n *yaml.Node, path, caKey string, needCert bool) TLS {
	var t TLS
	var certNode, keyNode *yaml.Node
	file := func(dst *string, at **yaml.Node) func(_, v *yaml.Node, f string) {
		return func(_, v *yaml.Node, f string) {
			if at != nil {
				*at = v
			}
			s, ok := p.str(v, f)
			if !ok {
				return
			}
			if s == "" {
				p.errorf(v, f, "empty: name a PEM file, or leave the field out")
				return
			}
			*dst = p.relative(s)
		}
	}
	p.fields(n, path, map[string]func(_, v *yaml.Node, f string){
		"cert_file": file(&t.CertFile, &certNode),
		"key_file":  file(&t.KeyFile, &keyNode),
		caKey:       file(&t.CAFile, nil),
	})
	switch {
	case certNode != nil && keyNode == nil:
		p.errorf(n, joinField(path, "key_file"), "missing: cert_file needs the file of its private key")
	case keyNode != nil && certNode == nil:
		p.errorf(n, joinField(path, "cert_file"), "missing: key_file needs the certificate it is the key of")
	case needCert && certNode == nil && keyNode == nil && n.Kind == yaml.MappingNode:
		p.errorf(n, joinField(path, "cert_file"), "missing: a TLS listener needs cert_file and key_file")
	}
	return t
}

// relative returns path, absolute, taken from the config file's directory
// when it is relative.
func (p *parser) relative(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	base, err := filepath.Abs(filepath.Dir(p.file))
	if err != nil {
		base = filepath.Dir(p.file)
	}
	return filepath.Join(base, path)
}
