package tlsfiles

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MaxFileBytes bounds each file Load reads: a certificate chain or a CA
// bundle is a few kilobytes.
const MaxFileBytes = 1 << 20

// DefaultDebounce is Options.Debounce when it is 0: a certificate manager
// writes the certificate, the key and the CA as several events within
// milliseconds.
const DefaultDebounce = 500 * time.Millisecond

// Files are the PEM files of one TLS endpoint.
type Files struct {
	// Cert is the certificate chain, leaf first; Key is its private key.
	// Both or neither.
	Cert, Key string
	// CA is a bundle of CA certificates. For a server it turns on mutual
	// TLS: a client must present a certificate one of them signed. For a
	// client it replaces the system roots the server's certificate is
	// verified against. "" for neither.
	CA string
}

// Role is a set of an endpoint's files: the ones a [FileError] is about.
type Role uint8

// The roles of an endpoint's files.
const (
	RoleCert Role = 1 << iota // the certificate chain
	RoleKey                   // its private key
	RoleCA                    // the CA bundle
)

// FileError is a problem with some of an endpoint's files, which Roles
// names (the certificate and the key, when they do not match), so a
// caller can say which of its flags or fields to fix.
type FileError struct {
	Roles Role
	Err   error
}

// Error is the problem; it names the file's path.
func (e *FileError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *FileError) Unwrap() error { return e.Err }

// fileError wraps err as the problem of the files of roles.
func fileError(roles Role, err error) error { return &FileError{Roles: roles, Err: err} }

// IsZero reports whether f names no file.
func (f Files) IsZero() bool { return f == Files{} }

// Options tune [Load]. The zero value works.
type Options struct {
	// Name says what the files are for in logs, e.g. "HTTP listener".
	Name string
	// NextProtos are the application protocols (ALPN) a server offers,
	// most preferred first: "h2" and "http/1.1" for an HTTP server. gRPC
	// adds its own.
	NextProtos []string
	// Debounce is the quiet time after the last change in the files'
	// directories before [Certs.Run] re-reads them; 0 means
	// DefaultDebounce.
	Debounce time.Duration
	// Logger receives reloads and failed reloads; nil discards them.
	Logger *slog.Logger
	// Now is the clock that expiry warnings read; nil means time.Now.
	Now func() time.Time
}

// Certs are the certificate, key and CA of one endpoint as last loaded.
// It is safe for concurrent use: handshakes read the files' last good
// contents while Run or Reload replace them.
type Certs struct {
	files Files
	opts  Options
	log   *slog.Logger
	mu    sync.Mutex // one read of the files at a time, so the newest wins
	cur   atomic.Pointer[loaded]
}

// loaded is one good read of the files.
type loaded struct {
	cert   *tls.Certificate // nil without Files.Cert
	roots  *x509.CertPool   // nil without Files.CA
	server *tls.Config      // what a server serves; nil without a certificate
	sum    [sha256.Size]byte
}

// Load reads and checks files: the certificate against its key, the CA
// bundle for at least one certificate. Each error names the file at
// fault. It starts nothing; see [Certs.Run].
func Load(files Files, opts Options) (*Certs, error) {
	switch {
	case files.IsZero():
		return nil, errors.New("no certificate, key or CA file given")
	case files.Cert != "" && files.Key == "":
		return nil, fileError(RoleKey, fmt.Errorf("certificate file %s needs its key file", files.Cert))
	case files.Key != "" && files.Cert == "":
		return nil, fileError(RoleCert, fmt.Errorf("key file %s needs its certificate file", files.Key))
	}
	c := &Certs{files: files, opts: opts, log: opts.Logger}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.opts.Now == nil {
		c.opts.Now = time.Now
	}
	l, err := c.read()
	if err != nil {
		return nil, err
	}
	c.cur.Store(l)
	c.logLoaded("TLS files loaded", l)
	return c, nil
}

// Files returns the files c reads.
func (c *Certs) Files() Files { return c.files }

// ServerConfig returns the configuration of a server presenting the
// certificate, as last loaded, at every handshake, and, with a CA file,
// requiring and verifying a client certificate that CA signed. It fails
// when c has no certificate.
func (c *Certs) ServerConfig() (*tls.Config, error) {
	if c.files.Cert == "" {
		return nil, fileError(RoleCert|RoleKey, fmt.Errorf("CA file %s: a server needs a certificate and key file too", c.files.CA))
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: c.opts.NextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return c.cur.Load().server, nil
		},
	}, nil
}

// ClientConfig returns the configuration of a client of serverName (a
// host name or IP address, checked against the server's certificate). It
// presents the certificate, as last loaded, when the server asks for one,
// and verifies the server against the CA file as last loaded, or against
// the system roots without one.
func (c *Certs) ClientConfig(serverName string) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if c.files.Cert != "" {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return c.cur.Load().cert, nil
		}
	}
	if c.files.CA != "" {
		// crypto/tls verifies against a fixed pool; to follow a rotated
		// CA file, the check is done here, as crypto/tls's own
		// VerifyConnection example does: the same chain and name check,
		// against the pool as last loaded.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error { return c.verifyServer(cs, serverName) }
	}
	return cfg
}

// verifyServer checks the server's chain against the CA as last loaded,
// and its certificate against name.
func (c *Certs) verifyServer(cs tls.ConnectionState, name string) error {
	if name == "" {
		return errors.New("tls: no server name to verify the server's certificate against")
	}
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the server sent no certificate")
	}
	opts := x509.VerifyOptions{DNSName: name, Roots: c.cur.Load().roots, Intermediates: x509.NewCertPool()}
	for _, ic := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(ic)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return fmt.Errorf("tls: verifying the server's certificate against CA file %s: %w", c.files.CA, err)
	}
	return nil
}

// Reload reads the files again. When they load, the next handshake uses
// them; when they do not, the files as last loaded stay in use and the
// error (naming the file) is logged and returned.
func (c *Certs) Reload() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, err := c.read()
	if err != nil {
		c.log.Warn("TLS files not reloaded; the ones loaded before stay in use", "for", c.opts.Name, "error", err)
		return err
	}
	if l.sum == c.cur.Load().sum {
		return nil
	}
	c.cur.Store(l)
	c.logLoaded("TLS files reloaded", l)
	return nil
}

// logLoaded logs what l holds, and warns of a certificate out of its
// validity period.
func (c *Certs) logLoaded(msg string, l *loaded) {
	attrs := []any{"for", c.opts.Name}
	if l.cert != nil {
		leaf := l.cert.Leaf
		attrs = append(attrs, "cert", c.files.Cert, "subject", leaf.Subject.String(), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
		if now := c.opts.Now(); now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
			c.log.Warn("TLS certificate is not valid now; clients will refuse it", append(attrs, "not_before", leaf.NotBefore.UTC().Format(time.RFC3339))...)
		}
	}
	if l.roots != nil {
		attrs = append(attrs, "ca", c.files.CA)
	}
	c.log.Info(msg, attrs...)
}

// read reads and checks the files once.
func (c *Certs) read() (*loaded, error) {
	l := &loaded{}
	h := sha256.New()
	if c.files.Cert != "" {
		certPEM, err := readFile(RoleCert, c.files.Cert)
		if err != nil {
			return nil, err
		}
		keyPEM, err := readFile(RoleKey, c.files.Key)
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fileError(RoleCert|RoleKey, fmt.Errorf("certificate file %s with key file %s: %w", c.files.Cert, c.files.Key, err))
		}
		l.cert = &pair
		l.server = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}, NextProtos: c.opts.NextProtos}
		h.Write(certPEM)
		h.Write(keyPEM)
	}
	if c.files.CA != "" {
		caPEM, err := readFile(RoleCA, c.files.CA)
		if err != nil {
			return nil, err
		}
		l.roots = x509.NewCertPool()
		if !l.roots.AppendCertsFromPEM(caPEM) {
			return nil, fileError(RoleCA, fmt.Errorf("CA file %s: no PEM certificate in it", c.files.CA))
		}
		if l.server != nil {
			l.server.ClientCAs = l.roots
			l.server.ClientAuth = tls.RequireAndVerifyClientCert
		}
		h.Write(caPEM)
	}
	h.Sum(l.sum[:0])
	return l, nil
}

// readFile reads a regular file of at most MaxFileBytes, the file of
// role; its errors are FileErrors.
func readFile(role Role, path string) ([]byte, error) {
	b, err := readRegular(role.String(), path)
	if err != nil {
		return nil, fileError(role, err)
	}
	return b, nil
}

// String names a role's file in errors: "certificate", "key" or "CA".
func (r Role) String() string {
	var names []string
	for _, n := range []struct {
		r    Role
		name string
	}{{RoleCert, "certificate"}, {RoleKey, "key"}, {RoleCA, "CA"}} {
		if r&n.r != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, " and ")
}

// readRegular reads a regular file of at most MaxFileBytes; what names
// its role in errors.
func readRegular(what, path string) ([]byte, error) {
	// Stat before opening: opening a named pipe would wait for a writer.
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s file: %w", what, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s file %s: not a regular file", what, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s file: %w", what, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s file: %w", what, err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%s file %s: larger than %d bytes", what, path, MaxFileBytes)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("%s file %s: empty", what, path)
	}
	return b, nil
}
