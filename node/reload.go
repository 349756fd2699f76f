package node

import (
	"context"
	"errors"
	"fmt"
)

// The parts Reload reloads, as its answer names them.
const (
	PartConfig = "config"      // the config file: policy, routes, pools
	PartRLS    = "rls"         // envoy ratelimit's config directory
	PartTLS    = "tls"         // the listeners' and the store's certificate files
	PartCreds  = "credentials" // the credentials file of SigV4 verification
)

// Reload reloads everything the node loaded from files: the config file
// (the throttling policy, the routes and the autoscaled pools) and, with
// an Envoy rate limit service, envoy ratelimit's config directory. Each
// part is all-or-nothing: a part whose file is bad keeps its old state,
// is logged and counted (tollgate_config_reloads_total,
// tollgate_rls_config_loads), and its error is returned, joined with the
// others'; the parts that did reload are named in reloaded (PartConfig,
// PartRLS, PartTLS), in that order. TLS files, re-read on their own when
// they change, are re-read here too: a bad one keeps the certificate in
// use. Store, listen and rls section settings take
// effect on restart; the admin token and the kubeconfig are read once.
//
// Reload runs one at a time. The file reads end when ctx ends or
// shutdown starts. It serves POST /v1/admin/reload; SIGHUP reaches it
// through TriggerReload.
func (n *Node) Reload(ctx context.Context) (reloaded []string, err error) {
	n.reloadMu.Lock()
	defer n.reloadMu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(n.stopping, cancel)() // shutdown ends the reads too
	n.reloadCtx = ctx
	defer func() { n.reloadCtx = nil }()
	var errs []error
	if err := n.gw.Reload(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", PartConfig, err))
	} else {
		reloaded = append(reloaded, PartConfig)
	}
	if n.rls != nil {
		if err := n.rls.Reload(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", PartRLS, err))
		} else {
			reloaded = append(reloaded, PartRLS)
		}
	}
	if len(n.certs.all()) > 0 {
		if err := n.certs.reload(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", PartTLS, err))
		} else {
			reloaded = append(reloaded, PartTLS)
		}
	}
	if n.creds != nil {
		if err := n.creds.reload(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", PartCreds, err))
		} else {
			reloaded = append(reloaded, PartCreds)
		}
	}
	return reloaded, errors.Join(errs...)
}

// TriggerReload asks Run's reload worker for a Reload and returns at
// once: false when one is already pending (the pending one will read the
// newest files). It never blocks, so a signal handler may call it.
func (n *Node) TriggerReload() bool {
	select {
	case n.reloads <- struct{}{}:
		return true
	default:
		return false
	}
}

// readContext is what bounds the config read of a reload: the running
// Reload's context, or, for a gateway reload outside one, shutdown.
func (n *Node) readContext() context.Context {
	if n.reloadCtx != nil {
		return n.reloadCtx
	}
	return n.stopping
}
