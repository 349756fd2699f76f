// Package tlsfiles turns certificate files into a [crypto/tls.Config]
// whose certificate follows the files: when a certificate manager
// (cert-manager, a Kubernetes Secret volume, a cron job) replaces them,
// the next handshake uses the new certificate, with no restart. It owns
// reading, checking and re-reading the PEM files of one endpoint; it
// never listens or dials.
//
// The files are re-read when fsnotify reports a change in a directory
// holding one of them (debounced, as package rls watches its config
// directory), not checked on each handshake: the handshake path only
// loads a pointer, and a Kubernetes Secret update, which swaps the
// "..data" symbolic link in the volume's directory, is one event there.
// A file that fails to load keeps the certificate already served; the
// failure is logged, and the next change tries again.
//
// # Lifecycle
//
//  1. [Load] reads and checks the files; an error names the file.
//  2. [Certs.ServerConfig] (a listener) or [Certs.ClientConfig] (a dialer)
//     returns the tls.Config to use; each handshake reads the current
//     certificate.
//  3. [Certs.Run] watches the files' directories until its context ends;
//     [Certs.Reload] re-reads them at once (on SIGHUP, say).
package tlsfiles
