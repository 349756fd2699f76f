package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestTLSSections(t *testing.T) {
	c, err := Parse("/etc/tollgate/t.yaml", []byte(`services:
  - preset: ecs
store:
  url: rediss://redis.internal:6380/0
  tls:
    ca_file: tls/redis-ca.crt
    cert_file: /run/secrets/client.crt
    key_file: /run/secrets/client.key
rls:
  config_dir: ratelimit
  tls:
    cert_file: tls/tls.crt
    key_file: tls/tls.key
    client_ca_file: tls/ca.crt
`))
	if err != nil {
		t.Fatal(err)
	}
	if want := (TLS{CertFile: "/etc/tollgate/tls/tls.crt", KeyFile: "/etc/tollgate/tls/tls.key", CAFile: "/etc/tollgate/tls/ca.crt"}); c.RLS.TLS != want {
		t.Errorf("rls.tls = %+v, want %+v", c.RLS.TLS, want)
	}
	if want := (TLS{CertFile: "/run/secrets/client.crt", KeyFile: "/run/secrets/client.key", CAFile: "/etc/tollgate/tls/redis-ca.crt"}); c.Store.TLS != want {
		t.Errorf("store.tls = %+v, want %+v", c.Store.TLS, want)
	}
	// A store tls section with only a CA, and a URL given by --store.
	c, err = Parse("conf/t.yaml", []byte("services:\n  - preset: ecs\nstore:\n  tls: {ca_file: ca.pem}\n"))
	if abs, _ := filepath.Abs("conf/ca.pem"); err != nil || c.Store.TLS != (TLS{CAFile: abs}) {
		t.Errorf("store.tls with a CA only: %+v, %v", c.Store.TLS, err)
	}
	if !Default().Store.TLS.IsZero() || !Default().RLS.TLS.IsZero() {
		t.Error("the default config has TLS files")
	}
}

func TestTLSSectionErrors(t *testing.T) {
	_, err := Parse("t.yaml", []byte(`services:
  - preset: ecs
store:
  url: redis://127.0.0.1:6379/0
  tls:
    cert_file: client.crt
rls:
  config_dir: /srv/ratelimit
  tls:
    key_file: ""
    ca_file: ca.crt
`))
	var errs ConfigErrors
	if !errors.As(err, &errs) {
		t.Fatalf("err = %v", err)
	}
	want := []string{
		`t.yaml:6:5: store.tls.key_file: missing: cert_file needs the file of its private key`,
		`t.yaml:6:5: store.tls: the store URL redis:// is not a TLS URL: use rediss:// (or rediss+cluster://, rediss+sentinel://) with a tls section`,
		`t.yaml:10:15: rls.tls.key_file: empty: name a PEM file, or leave the field out`,
		`t.yaml:11:5: rls.tls.ca_file: unknown field (known: cert_file, client_ca_file, key_file)`,
		`t.yaml:10:5: rls.tls.cert_file: missing: key_file needs the certificate it is the key of`,
	}
	if got := errs.Error(); got != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	_, err = Parse("t.yaml", []byte("services:\n  - preset: ecs\nrls:\n  config_dir: /srv/rl\n  tls: {client_ca_file: ca.crt}\n"))
	if err == nil || !strings.Contains(err.Error(), "t.yaml:5:8: rls.tls.cert_file: missing: a TLS listener needs cert_file and key_file") {
		t.Errorf("rls.tls with only a client CA: %v", err)
	}
}
