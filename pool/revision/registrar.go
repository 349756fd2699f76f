package revision

import (
	"context"
	"time"
)

// Registrar lists a service's ready instances in a service registry, such
// as tollgate's local Cloud Map (cloudmap.Registry.Registrar). The pool
// calls Register once an instance is ready, and Deregister once it stops
// taking new requests: when it starts draining, is stopped, exits on its
// own, or its revision is replaced. So the registry holds exactly the
// instances that take requests.
//
// Calls for one revision come in order from one goroutine, never under a
// lock of the pool or the revision, each bounded by registrarTimeout; an
// error is logged and not retried. The instance is named by
// runner.InstanceSpec.ID and addr is its host:port.
type Registrar interface {
	Register(ctx context.Context, instance, addr string) error
	Deregister(ctx context.Context, instance string) error
}

// registrarTimeout bounds one Registrar call.
const registrarTimeout = 10 * time.Second

// registry is a revision's Registrar and the calls queued for it;
// guarded by rv.mu.
type registry struct {
	reg     Registrar // nil: no registry; set before run
	regQ    []regEvent
	regWake chan struct{}
}

// regEvent is one queued Registrar call.
type regEvent struct {
	name, addr string
	up         bool
}

// announce queues the registration (up) or deregistration of in, once per
// change; rv.mu is held.
func (rv *Revision) announce(in *instance, up bool) {
	if rv.reg == nil || in.registered == up {
		return
	}
	in.registered = up
	e := regEvent{name: in.name, up: up}
	if in.run != nil {
		e.addr = in.run.Addr()
	}
	rv.regQ = append(rv.regQ, e)
	select {
	case rv.regWake <- struct{}{}:
	default:
	}
}

// registrations makes the queued Registrar calls in order until done is
// closed, then makes those left and returns. The calls outlive ctx (the
// deregistrations of a shutdown come after it ends), each bounded by
// registrarTimeout.
func (rv *Revision) registrations(ctx context.Context, done <-chan struct{}) {
	ctx = context.WithoutCancel(ctx)
	for {
		last := false
		select {
		case <-rv.regWake:
		case <-done:
			last = true
		}
		rv.mu.Lock()
		q := rv.regQ
		rv.regQ = nil
		rv.mu.Unlock()
		for _, e := range q {
			cctx, cancel := context.WithTimeout(ctx, registrarTimeout)
			var err error
			if e.up {
				err = rv.reg.Register(cctx, e.name, e.addr)
			} else {
				err = rv.reg.Deregister(cctx, e.name)
			}
			cancel()
			if err != nil {
				rv.log.Warn("service registry call failed", "instance", e.name, "register", e.up, "error", err)
			}
		}
		if last {
			return
		}
	}
}
