package process

// This file is an instance's readiness: the check that starts with it,
// and Ready, which waits for it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Ready waits for the readiness check that started with the instance.
func (i *instance) Ready(ctx context.Context) error {
	select {
	case <-i.ready:
		i.mu.Lock()
		defer i.mu.Unlock()
		return i.readyErr
	case <-ctx.Done():
		return fmt.Errorf("waiting for instance %s of %s to be ready: %w", i.spec.ID, i.spec.Service, ctx.Err())
	}
}

// probe polls the readiness check until it passes, the readiness timeout
// passes or the process exits, and then closes ready.
func (i *instance) probe() {
	timeout := i.r.opts.Readiness.Timeout
	deadline := i.started.Add(timeout)
	var client *http.Client
	if i.r.opts.Readiness.Path != "" {
		client = &http.Client{
			Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse // a 3xx passes, as in Kubernetes
			},
		}
		defer client.CloseIdleConnections()
	}
	var last error
	for n := 0; ; n++ {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			i.setReady(fmt.Errorf("%w: %s of %s not ready within %v: %v", ErrNotReady, i.spec.ID, i.spec.Service, timeout, last))
			return
		}
		attempt := min(remaining, time.Second)
		err := i.check(client, attempt)
		if err == nil {
			i.log.Debug("process ready", "pid", i.mainPID, "after", time.Since(i.started).Round(time.Millisecond))
			i.setReady(nil)
			return
		}
		// Keep what the service said over an attempt cut short by the
		// deadline: "503 Service Unavailable" explains more.
		var ne net.Error
		if last == nil || !errors.As(err, &ne) || !ne.Timeout() {
			last = err
		}
		wait := min(time.Millisecond<<min(n, 4), 10*time.Millisecond, time.Until(deadline))
		t := time.NewTimer(wait)
		select {
		case <-i.exited:
			t.Stop()
			<-i.done
			i.mu.Lock()
			err := i.err
			i.mu.Unlock()
			if err == nil {
				err = errors.New("stopped")
			}
			i.setReady(fmt.Errorf("%w: %s of %s exited before it was ready: %w", ErrNotReady, i.spec.ID, i.spec.Service, err))
			return
		case <-t.C:
		}
	}
}

// check runs the readiness check once.
func (i *instance) check(client *http.Client, timeout time.Duration) error {
	if client == nil {
		c, err := net.DialTimeout("tcp", i.addr, timeout)
		if err != nil {
			return err
		}
		return c.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+i.addr+i.r.opts.Readiness.Path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "tollgate-probe")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s: %s", i.r.opts.Readiness.Path, resp.Status)
	}
	return nil
}

func (i *instance) setReady(err error) {
	i.mu.Lock()
	i.readyErr = err
	i.mu.Unlock()
	if err != nil {
		i.log.Warn("instance failed its readiness check", "pid", i.mainPID, "err", err)
	}
	close(i.ready)
}
