package node

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/filewatch"
	"github.com/tollgate/tollgate/internal/tlsfiles"
)

// credentials is the node's credentials file (--credentials, or the
// config's auth.credentials_file) and the SigV4 verifier it feeds.
type credsFile struct {
	path   string // the file
	source string // where it was named: the flag, or the config's field
	v      *awsjson.Verifier
	log    *slog.Logger
}

// loadCredentials reads the credentials file the flag or the config
// names; nil, nil when neither names one.
func loadCredentials(flag string, cfg *config.Config, configName string, log *slog.Logger) (*credsFile, error) {
	c := &credsFile{path: flag, source: "--credentials", log: log}
	if flag == "" {
		c.path, c.source = cfg.Auth.CredentialsFile, configName+": auth.credentials_file"
	}
	if c.path == "" {
		return nil, nil
	}
	creds, err := awsjson.ReadCredentialsFile(c.path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.source, err)
	}
	c.v = awsjson.NewVerifier(creds, awsjson.VerifierOptions{Failures: awsjson.NewFailureBound(awsjson.FailureOptions{})})
	log.Info("AWS requests must be signed (SigV4) by a key of the credentials file", "file", c.path, "keys", creds.Len())
	return c, nil
}

// verifier is the gateway's verifier; nil without a credentials file.
func (c *credsFile) verifier() *awsjson.Verifier {
	if c == nil {
		return nil
	}
	return c.v
}

// reload re-reads the file; a bad file keeps the keys in use.
func (c *credsFile) reload() error {
	creds, err := awsjson.ReadCredentialsFile(c.path)
	if err != nil {
		c.log.Error("credentials file not reloaded; the keys in use stay", "file", c.path, "error", err)
		return fmt.Errorf("%s: %w", c.source, err)
	}
	old := c.v.Credentials()
	if slices.Equal(old.AccessKeyIDs(), creds.AccessKeyIDs()) && sameSecrets(old, creds) {
		return nil
	}
	c.v.SetCredentials(creds)
	c.log.Info("credentials file reloaded", "file", c.path, "keys", creds.Len())
	return nil
}

func sameSecrets(a, b *awsjson.Credentials) bool {
	for _, id := range a.AccessKeyIDs() {
		x, _ := a.Lookup(id)
		y, _ := b.Lookup(id)
		if x != y {
			return false
		}
	}
	return true
}

// run re-reads the file when it changes, until ctx ends.
func (c *credsFile) run(ctx context.Context) error {
	return filewatch.Watch{
		Name:     "credentials file",
		Files:    func() []string { return []string{c.path} },
		Reload:   func() { _ = c.reload() },
		Debounce: tlsfiles.DefaultDebounce,
		Logger:   c.log,
	}.Run(ctx)
}

// warnUnverified warns when an API that tenants write to answers
// without SigV4 verification: whoever claims an access key id is that
// tenant to it.
func warnUnverified(log *slog.Logger, cfg *config.Config, handled []string) {
	var writable []string
	for _, s := range cfg.Quota.Services() {
		if slices.Contains(handled, s.Name) && s.Upstream == "" && !s.Autoscaled {
			writable = append(writable, s.Name)
		}
	}
	if len(writable) == 0 {
		return
	}
	log.Warn("SigV4 is not verified: "+strings.Join(writable, " and ")+" accept writes from whoever a request's access key id claims to be; anyone who knows or makes up a tenant's key id can write as that tenant. Give --credentials FILE (the AWS shared credentials format) to verify signatures",
		"apis", writable)
}
