package servicequotas

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/awsjson"
)

// redisPrefix starts every key of the store. The braces are a Redis
// Cluster hash tag: every key is in one slot, so the scripts may touch
// several.
const redisPrefix = "tollgate:{servicequotas}:"

// The store's keys in Redis, each small and each touched only by the
// writes it concerns:
//
//	req:ID            hash: one request's fields
//	acct:ACCOUNT      sorted set: the account's request ids by seq
//	open:ACCOUNT      hash: region|service|quota -> id of its PENDING request
//	closed:ACCOUNT    sorted set: its closed request ids by the seq of closing
//	all               sorted set: every request id by seq (the admin listing)
//	pending           sorted set: every PENDING request id by seq
//	unmapped:open     sorted set: unmapped accounts' PENDING ids
//	unmapped:closed   sorted set: unmapped accounts' closed ids by the seq of closing
//	applied           hash: appliedKey -> value
//	applied:unmapped  set: applied keys an unmapped request set
//	seq, version      counters: the order of requests; the applied values' version
//
// and the tags of quota ARNs (tags:, tagged:; see redisTag).
const (
	redisSeqKey     = redisPrefix + "seq"
	redisVersionKey = redisPrefix + "version"
	redisAppliedKey = redisPrefix + "applied"
	redisAllKey     = redisPrefix + "all"
	redisPendingKey = redisPrefix + "pending"
)

// redisClose is the part of the scripts that files a closed request,
// applies an approved value and forgets what is beyond the bounds.
const redisClose = `
local function drop(p, id, acct)
  redis.call('DEL', p..'req:'..id)
  redis.call('ZREM', p..'acct:'..acct, id)
  redis.call('ZREM', p..'closed:'..acct, id)
  redis.call('ZREM', p..'all', id)
  redis.call('ZREM', p..'unmapped:closed', id)
end
local function close(p, id, acct, status, unmapped, akey, desired, maxClosed, maxClosedUnmapped)
  if status == 'APPROVED' then
    redis.call('HSET', p..'applied', akey, desired)
    if unmapped then redis.call('SADD', p..'applied:unmapped', akey) end
    redis.call('INCR', p..'version')
  end
  local cs = redis.call('INCR', p..'seq')
  redis.call('ZADD', p..'closed:'..acct, cs, id)
  if unmapped then redis.call('ZADD', p..'unmapped:closed', cs, id) end
  while redis.call('ZCARD', p..'closed:'..acct) > maxClosed do
    drop(p, redis.call('ZRANGE', p..'closed:'..acct, 0, 0)[1], acct)
  end
  if unmapped then
    while redis.call('ZCARD', p..'unmapped:closed') > maxClosedUnmapped do
      local old = redis.call('ZRANGE', p..'unmapped:closed', 0, 0)[1]
      local a = redis.call('HGET', p..'req:'..old, 'account')
      if a then drop(p, old, a) else redis.call('ZREM', p..'unmapped:closed', old) end
    end
  end
end
`

// redisCreate stores a new request: KEYS[1] the seq key; ARGV prefix,
// id, account, region, service, quota, desired, status, reason, now,
// unmapped (1 or 0), expected applied value ("" none), and the bounds.
var redisCreate = redis.NewScript(redisClose + `
local p, id, acct = ARGV[1], ARGV[2], ARGV[3]
local region, svc, q, desired, status = ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local unmapped = ARGV[11] == '1'
local akey = acct..'|'..region..'|'..svc..'|'..q
local cur = redis.call('HGET', p..'applied', akey)
if (cur or '') ~= ARGV[12] then return {'retry'} end
local okey = p..'open:'..acct
local qk = region..'|'..svc..'|'..q
local dup = redis.call('HGET', okey, qk)
if dup then return {'exists', dup} end
local n = redis.call('HLEN', okey)
if n >= tonumber(ARGV[13]) then return {'open', tostring(n)} end
if unmapped and status == 'PENDING' and redis.call('ZCARD', p..'unmapped:open') >= tonumber(ARGV[14]) then return {'budget'} end
if unmapped and status == 'APPROVED' and not cur and redis.call('SCARD', p..'applied:unmapped') >= tonumber(ARGV[17]) then return {'applied'} end
local seq = redis.call('INCR', KEYS[1])
redis.call('HSET', p..'req:'..id, 'account', acct, 'region', region, 'service', svc, 'quota', q, 'desired', desired,
  'status', status, 'reason', ARGV[9], 'created', ARGV[10], 'updated', ARGV[10], 'unmapped', ARGV[11], 'seq', seq)
redis.call('ZADD', p..'acct:'..acct, seq, id)
redis.call('ZADD', p..'all', seq, id)
if status == 'PENDING' then
  redis.call('HSET', okey, qk, id)
  redis.call('ZADD', p..'pending', seq, id)
  if unmapped then redis.call('ZADD', p..'unmapped:open', seq, id) end
else
  close(p, id, acct, status, unmapped, akey, desired, tonumber(ARGV[15]), tonumber(ARGV[16]))
end
return {'ok'}
`)

// redisDecide closes a PENDING request: KEYS[1] its req key; ARGV
// prefix, id, status, reason, now and the closed bounds. It answers the
// request's fields before it closed, or {'missing'}.
var redisDecide = redis.NewScript(redisClose + `
local p, id, status = ARGV[1], ARGV[2], ARGV[3]
local r = redis.call('HGETALL', KEYS[1])
if #r == 0 then return {'missing'} end
local f = {}
for i = 1, #r, 2 do f[r[i]] = r[i+1] end
if f.status ~= 'PENDING' then return r end
local unmapped = f.unmapped == '1'
redis.call('HSET', KEYS[1], 'status', status, 'reason', ARGV[4], 'updated', ARGV[5])
redis.call('HDEL', p..'open:'..f.account, f.region..'|'..f.service..'|'..f.quota)
redis.call('ZREM', p..'pending', id)
redis.call('ZREM', p..'unmapped:open', id)
close(p, id, f.account, status, unmapped, f.account..'|'..f.region..'|'..f.service..'|'..f.quota, f.desired,
  tonumber(ARGV[6]), tonumber(ARGV[7]))
return r
`)

// redisSet sets or removes (value "0") one applied value: KEYS[1] the
// applied hash; ARGV prefix, key, value.
var redisSet = redis.NewScript(`
local p = ARGV[1]
if ARGV[3] == '0' then redis.call('HDEL', KEYS[1], ARGV[2]) else redis.call('HSET', KEYS[1], ARGV[2], ARGV[3]) end
redis.call('SREM', p..'applied:unmapped', ARGV[2])
return redis.call('INCR', p..'version')
`)

// redisBackend keeps the store in Redis, one key per request and small
// indexes beside them (see redisPrefix); every write is one script, so a
// request and the value it applies change together.
type redisBackend struct{ rdb redis.UniversalClient }

func storeErr(what string, err error) error {
	return fmt.Errorf("servicequotas: %s: %w", what, err)
}

func bit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (b *redisBackend) create(ctx context.Context, r Request, e expect) error {
	exp := ""
	if e.set {
		exp = formatValue(e.value)
	}
	res, err := redisCreate.Run(ctx, b.rdb, []string{redisSeqKey}, redisPrefix, r.ID, r.Account, r.Region, r.ServiceCode,
		r.QuotaCode, formatValue(r.DesiredValue), r.Status, r.Reason, r.Created, bit(r.Unmapped), exp,
		MaxOpenPerAccount, MaxOpenUnmapped, MaxClosedPerAccount, MaxClosedUnmapped, MaxAppliedUnmapped).StringSlice()
	if err != nil {
		return storeErr("create request", err)
	}
	switch res[0] {
	case "ok":
		return nil
	case "retry":
		return errRetry
	case "exists":
		return errOpenExists(res[1])
	case "open":
		n, _ := strconv.Atoi(res[1])
		return errTooManyOpen(n)
	case "budget":
		return errUnmappedBudget()
	case "applied":
		return errUnmappedApplied()
	}
	return storeErr("create request", errors.New("script answered "+awsjson.Clip(res[0])))
}

func (b *redisBackend) decide(ctx context.Context, id, status, reason string, now int64) (Request, error) {
	res, err := redisDecide.Run(ctx, b.rdb, []string{redisPrefix + "req:" + id}, redisPrefix, id, status, reason, now,
		MaxClosedPerAccount, MaxClosedUnmapped).StringSlice()
	if err != nil {
		return Request{}, storeErr("decide request", err)
	}
	if len(res) == 1 && res[0] == "missing" {
		return Request{}, errNotFound
	}
	f := make(map[string]string, len(res)/2)
	for i := 0; i+1 < len(res); i += 2 {
		f[res[i]] = res[i+1]
	}
	r := fromHash(id, f)
	if r.Status != StatusPending {
		return r, errNotPending
	}
	r.Status, r.Reason, r.LastUpdated = status, reason, now
	return r, nil
}

// fromHash reads a request's hash.
func fromHash(id string, f map[string]string) Request {
	r := Request{ID: id, Account: f["account"], Region: f["region"], ServiceCode: f["service"], QuotaCode: f["quota"],
		Status: f["status"], Reason: f["reason"], Unmapped: f["unmapped"] == "1"}
	r.DesiredValue, _ = strconv.ParseFloat(f["desired"], 64)
	r.Created, _ = strconv.ParseInt(f["created"], 10, 64)
	r.LastUpdated, _ = strconv.ParseInt(f["updated"], 10, 64)
	r.seq, _ = strconv.ParseInt(f["seq"], 10, 64)
	return r
}

func (b *redisBackend) get(ctx context.Context, id string) (Request, error) {
	f, err := b.rdb.HGetAll(ctx, redisPrefix+"req:"+id).Result()
	if err != nil {
		return Request{}, storeErr("read request", err)
	}
	if len(f) == 0 {
		return Request{}, errNotFound
	}
	return fromHash(id, f), nil
}

// load reads the requests ids names, in that order, skipping any
// forgotten since the ids were read.
func (b *redisBackend) load(ctx context.Context, ids []string) ([]Request, error) {
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err := b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, redisPrefix+"req:"+id)
		}
		return nil
	})
	if err != nil {
		return nil, storeErr("read requests", err)
	}
	out := make([]Request, 0, len(ids))
	for i, c := range cmds {
		if f := c.Val(); len(f) > 0 {
			out = append(out, fromHash(ids[i], f))
		}
	}
	return out, nil
}

func (b *redisBackend) account(ctx context.Context, account string) ([]Request, error) {
	ids, err := b.rdb.ZRevRange(ctx, redisPrefix+"acct:"+account, 0, -1).Result()
	if err != nil {
		return nil, storeErr("read account", err)
	}
	return b.load(ctx, ids)
}

// pageChunk is how many ids page reads at a time while it filters.
const pageChunk = 200

func (b *redisBackend) page(ctx context.Context, f pageFilter) ([]Request, int64, error) {
	index := redisAllKey
	switch {
	case f.account != "":
		index = redisPrefix + "acct:" + f.account
	case len(f.statuses) == 1 && f.statuses[StatusPending]:
		index = redisPendingKey
	}
	max := "+inf"
	if f.before > 0 {
		max = "(" + strconv.FormatInt(f.before, 10)
	}
	var out []Request
	for {
		ids, err := b.rdb.ZRevRangeByScore(ctx, index, &redis.ZRangeBy{Min: "-inf", Max: max, Count: pageChunk}).Result()
		if err != nil {
			return nil, 0, storeErr("list requests", err)
		}
		rs, err := b.load(ctx, ids)
		if err != nil {
			return nil, 0, err
		}
		for _, r := range rs {
			if f.statuses != nil && !f.statuses[r.Status] {
				continue
			}
			out = append(out, r)
			if len(out) > f.limit {
				return out[:f.limit], out[f.limit-1].seq, nil
			}
		}
		if len(ids) < pageChunk {
			return out, 0, nil
		}
		if len(rs) > 0 {
			max = "(" + strconv.FormatInt(rs[len(rs)-1].seq, 10)
		} else {
			// Every request of this chunk was forgotten meanwhile: read
			// their scores to go on past them.
			s, err := b.rdb.ZScore(ctx, index, ids[len(ids)-1]).Result()
			if err != nil {
				return out, 0, nil
			}
			max = "(" + strconv.FormatFloat(s, 'f', -1, 64)
		}
	}
}

func (b *redisBackend) values(ctx context.Context, keys []string) (map[string]float64, error) {
	out := make(map[string]float64, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	vs, err := b.rdb.HMGet(ctx, redisAppliedKey, keys...).Result()
	if err != nil {
		return nil, storeErr("read applied values", err)
	}
	for i, v := range vs {
		if s, ok := v.(string); ok {
			if x, err := strconv.ParseFloat(s, 64); err == nil {
				out[keys[i]] = x
			}
		}
	}
	return out, nil
}

func (b *redisBackend) applied(ctx context.Context) (int64, map[string]float64, error) {
	var ver *redis.StringCmd
	var all *redis.MapStringStringCmd
	_, err := b.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		ver = p.Get(ctx, redisVersionKey)
		all = p.HGetAll(ctx, redisAppliedKey)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, nil, storeErr("read applied values", err)
	}
	v, _ := ver.Int64()
	out := make(map[string]float64, len(all.Val()))
	for k, s := range all.Val() {
		if x, err := strconv.ParseFloat(s, 64); err == nil {
			out[k] = x
		}
	}
	return v, out, nil
}

func (b *redisBackend) version(ctx context.Context) (int64, error) {
	v, err := b.rdb.Get(ctx, redisVersionKey).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, storeErr("read version", err)
	}
	return v, nil
}

func (b *redisBackend) set(ctx context.Context, key string, value float64) error {
	if err := redisSet.Run(ctx, b.rdb, []string{redisAppliedKey}, redisPrefix, key, formatValue(value)).Err(); err != nil {
		return storeErr("set applied value", err)
	}
	return nil
}
