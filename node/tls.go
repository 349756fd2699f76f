package node

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/tlsfiles"
)

// nodeCerts are the certificate files of the node's TLS endpoints, each
// nil when that endpoint is plaintext. Run watches every one of them;
// Reload re-reads them.
type nodeCerts struct {
	http  *tlsfiles.Certs // the HTTP listener's (Options.TLS)
	grpc  *tlsfiles.Certs // the gRPC listener's (rls.tls)
	store *tlsfiles.Certs // the Redis connections' (store.tls)
}

// all returns the certificates in use.
func (c nodeCerts) all() []*tlsfiles.Certs {
	var out []*tlsfiles.Certs
	for _, x := range []*tlsfiles.Certs{c.http, c.grpc, c.store} {
		if x != nil {
			out = append(out, x)
		}
	}
	return out
}

// reload re-reads every endpoint's files; a bad file keeps the loaded
// ones (tlsfiles.Certs.Reload) and its error is returned.
func (c nodeCerts) reload() error {
	var errs []error
	for _, x := range c.all() {
		errs = append(errs, x.Reload())
	}
	return errors.Join(errs...)
}

// storeTLS returns how the Redis connections make their TLS
// configuration; nil for go-redis's own.
func (c nodeCerts) storeTLS() func(serverName string) *tls.Config {
	if c.store == nil {
		return nil
	}
	return c.store.ClientConfig
}

// tlsSource names where each of an endpoint's files was given (a flag,
// or a config file's field), so an error names the one to fix.
type tlsSource struct{ cert, key, ca string }

// tlsFields is the source of files given in a config file's section at
// path, whose CA field is caKey.
func tlsFields(file, path, caKey string) tlsSource {
	at := file + ": " + path + "."
	return tlsSource{at + "cert_file", at + "key_file", at + caKey}
}

// wrap puts in front of err the sources of the files it is about (all of
// them when it does not say).
func (s tlsSource) wrap(err error) error {
	roles := tlsfiles.RoleCert | tlsfiles.RoleKey | tlsfiles.RoleCA
	if fe, ok := errors.AsType[*tlsfiles.FileError](err); ok {
		roles = fe.Roles
	}
	var names []string
	for _, r := range []struct {
		role tlsfiles.Role
		name string
	}{{tlsfiles.RoleCert, s.cert}, {tlsfiles.RoleKey, s.key}, {tlsfiles.RoleCA, s.ca}} {
		if roles&r.role != 0 {
			names = append(names, r.name)
		}
	}
	return fmt.Errorf("%s: %w", strings.Join(names, ", "), err)
}

// loadListenerCerts loads a listener's files, or returns nil for a
// plaintext listener (no files). source names where the files were given,
// for errors.
func loadListenerCerts(files config.TLS, name string, source tlsSource, protos []string, log *slog.Logger) (*tlsfiles.Certs, *tls.Config, error) {
	if files.IsZero() {
		return nil, nil, nil
	}
	c, err := tlsfiles.Load(tlsFiles(files), tlsfiles.Options{Name: name, NextProtos: protos, Logger: log})
	if err != nil {
		return nil, nil, source.wrap(err)
	}
	cfg, err := c.ServerConfig()
	if err != nil {
		return nil, nil, source.wrap(err)
	}
	return c, cfg, nil
}

// loadStoreCerts loads the Redis connections' files, or returns nil when
// none is given. They need a TLS store URL.
func loadStoreCerts(st config.Store, source tlsSource, log *slog.Logger) (*tlsfiles.Certs, error) {
	if st.TLS.IsZero() {
		return nil, nil
	}
	if !strings.HasPrefix(st.URL, "rediss") {
		scheme, _, _ := strings.Cut(st.URL, ":")
		return nil, source.wrap(fmt.Errorf("TLS files are given for the store, but the store is %s, not a TLS Redis URL (rediss://, rediss+cluster://, rediss+sentinel://)", scheme))
	}
	c, err := tlsfiles.Load(tlsFiles(st.TLS), tlsfiles.Options{Name: "Redis store", Logger: log})
	if err != nil {
		return nil, source.wrap(err)
	}
	return c, nil
}

func tlsFiles(t config.TLS) tlsfiles.Files {
	return tlsfiles.Files{Cert: t.CertFile, Key: t.KeyFile, CA: t.CAFile}
}

// tlsMode names a listener's TLS in logs: plaintext, tls or mtls.
func tlsMode(files config.TLS) string {
	switch {
	case files.IsZero():
		return "plaintext"
	case files.CAFile != "":
		return "mtls"
	}
	return "tls"
}
