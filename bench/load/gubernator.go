package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
)

// -mode gubernator drives gubernator's gRPC API, pb.gubernator.V1/
// GetRateLimits, with the same load as -mode rls: o.batch rate limits per
// call, each {name "load", unique_key "account:N" for N random of
// o.keys, limit 50 per 1,000 ms, hits 1, TOKEN_BUCKET}, as
// bench/rls/load.yaml asks of the Envoy rate limit services.
//
// gubernator's generated Go types come with its module, which would add
// its etcd, Kubernetes and memberlist dependencies to tollgate's; the two
// messages are small and stable, so this client writes and reads them with
// protobuf's wire package and sends the bytes through a pass-through gRPC
// codec instead.

// gubernatorMethod is the full gRPC method name of GetRateLimits
// (gubernator.proto: package pb.gubernator, service V1).
const gubernatorMethod = "/pb.gubernator.V1/GetRateLimits"

// gubernatorConns are the connections of -mode gubernator; worker w uses
// gubernatorConns[w % len].
var gubernatorConns []*grpc.ClientConn

// rawCodec sends and receives already-encoded protobuf messages (*[]byte).
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
	}
	return *b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
	}
	*b = append((*b)[:0], data...)
	return nil
}

// Name is "proto", so the server sees application/grpc+proto.
func (rawCodec) Name() string { return "proto" }

// dialGubernator opens n connections to a gubernator at addr.
func dialGubernator(addr string, n int) (func(), error) {
	if addr == "" {
		return nil, errors.New("-mode gubernator needs -grpc ADDR (gubernator's GUBER_GRPC_ADDRESS)")
	}
	closeAll := func() {
		for _, c := range gubernatorConns {
			c.Close()
		}
	}
	for range max(n, 1) {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
		if err != nil {
			closeAll()
			return nil, err
		}
		gubernatorConns = append(gubernatorConns, c)
	}
	return closeAll, nil
}

// appendRateLimitReq appends one GetRateLimitsReq.requests entry (field 1,
// a RateLimitReq) for account to b.
func appendRateLimitReq(b []byte, account int) []byte {
	var m []byte
	m = protowire.AppendTag(m, 1, protowire.BytesType) // name
	m = protowire.AppendString(m, "load")
	m = protowire.AppendTag(m, 2, protowire.BytesType) // unique_key
	m = protowire.AppendString(m, "account:"+strconv.Itoa(account))
	m = protowire.AppendTag(m, 3, protowire.VarintType) // hits
	m = protowire.AppendVarint(m, 1)
	m = protowire.AppendTag(m, 4, protowire.VarintType) // limit
	m = protowire.AppendVarint(m, 50)
	m = protowire.AppendTag(m, 5, protowire.VarintType) // duration, ms
	m = protowire.AppendVarint(m, 1000)
	// algorithm (6) TOKEN_BUCKET and behavior (7) BATCHING are 0, the
	// defaults, so absent.
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

// countGubernatorResp reads a GetRateLimitsResp: every responses entry
// (field 1, a RateLimitResp) with status (1) OVER_LIMIT counts as
// throttled, else allowed; an entry with error (5) set is an error.
func countGubernatorResp(b []byte, r *result) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		m, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		over, errMsg := false, ""
		for len(m) > 0 {
			fnum, ftyp, k := protowire.ConsumeTag(m)
			if k < 0 {
				return protowire.ParseError(k)
			}
			m = m[k:]
			switch {
			case fnum == 1 && ftyp == protowire.VarintType:
				v, k := protowire.ConsumeVarint(m)
				if k < 0 {
					return protowire.ParseError(k)
				}
				over, m = v == 1, m[k:]
			case fnum == 5 && ftyp == protowire.BytesType:
				s, k := protowire.ConsumeString(m)
				if k < 0 {
					return protowire.ParseError(k)
				}
				errMsg, m = s, m[k:]
			default:
				if k = protowire.ConsumeFieldValue(fnum, ftyp, m); k < 0 {
					return protowire.ParseError(k)
				}
				m = m[k:]
			}
		}
		switch {
		case errMsg != "":
			return fmt.Errorf("rate limit error: %s", errMsg)
		case over:
			r.throttled++
		default:
			r.allowed++
		}
	}
	return nil
}

// gubernatorWorker sends GetRateLimits calls of o.batch rate limits each
// until ctx ends.
func gubernatorWorker(ctx context.Context, conn *grpc.ClientConn, o options, id int, interval time.Duration) result {
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	var r result
	r.latencies = make([]time.Duration, 0, 1<<16)
	next := time.Now()
	var req, resp []byte
	for ctx.Err() == nil {
		if interval > 0 {
			next = next.Add(interval)
			if d := time.Until(next); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return r
				}
			}
		}
		req = req[:0]
		for range o.batch {
			req = appendRateLimitReq(req, rng.IntN(o.keys))
		}
		t0 := time.Now()
		if interval > 0 {
			t0 = next // no coordinated omission, as in worker
		}
		err := conn.Invoke(ctx, gubernatorMethod, &req, &resp)
		if err == nil {
			err = countGubernatorResp(resp, &r)
		}
		if err != nil {
			if runEnded(ctx, err) {
				break
			}
			r.errs++
			if r.firstErr == nil {
				r.firstErr = fmt.Errorf("GetRateLimits: %w", err)
			}
			continue
		}
		r.ok++
		r.latencies = append(r.latencies, time.Since(t0))
	}
	return r
}

// countGubernatorJSON counts the answers of one GetRateLimits call made
// through gubernator's HTTP gateway (protojson: the status by name, absent
// for UNDER_LIMIT when unpopulated fields are left out) into r; an answer
// with its error field set is an error.
func countGubernatorJSON(body []byte, r *result) error {
	var resp struct {
		Responses []struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		} `json:"responses"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return fmt.Errorf("GetRateLimits answer: %w", err)
	}
	if len(resp.Responses) == 0 {
		return fmt.Errorf("GetRateLimits answer without responses: %.200s", body)
	}
	for _, x := range resp.Responses {
		switch {
		case x.Error != "":
			return errors.New("rate limit error: " + x.Error)
		case x.Status == "OVER_LIMIT":
			r.throttled++
		case x.Status == "" || x.Status == "UNDER_LIMIT":
			r.allowed++
		default:
			return fmt.Errorf("rate limit status %q", x.Status)
		}
	}
	return nil
}
