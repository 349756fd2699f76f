package cloudmap

import (
	"context"
	"errors"
	"strconv"

	goredis "github.com/redis/go-redis/v9"
)

// budgetTotal is the field of the budget hash that holds the sum of the
// scopes' sizes.
const budgetTotal = "*"

// budgetKey is the hash of the unknown accounts' scopes' sizes. Its hash
// tag puts it in one Redis Cluster slot of its own.
func (r *redisStore) budgetKey() string { return r.prefix + "{unknown-accounts}" }

// accountField is the field of the budget hash that holds the sum of an
// account's scopes' sizes: all its regions together. Scope fields are
// "ACCOUNT/REGION", so "@ACCOUNT" is never one.
func accountField(scope string) string { return "@" + accountOf(scope) }

// reserveScript sets a scope's size in the budget hash, and the sums of
// the budget and of the scope's account with it. KEYS: the budget hash.
// ARGV: the scope, its new size (0 removes it), the budget's max, "1"
// when the change grew the scope, the account's field, the account's max
// and what the change was checked against as the account's other scopes'
// sum. A change that grew the scope is refused when the sum would pass
// max, answering -1, or, when the account's other scopes grew since the
// check (a change in another region, on another node), the account's sum
// its max, answering -2; else it answers 0.
var reserveScript = goredis.NewScript(`
local old = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local sum = tonumber(redis.call('HGET', KEYS[1], '` + budgetTotal + `') or '0')
local acct = tonumber(redis.call('HGET', KEYS[1], ARGV[5]) or '0')
local new = tonumber(ARGV[2])
local after = sum - old + new
local acctAfter = acct - old + new
if ARGV[4] == '1' and new > old then
  if acct - old > tonumber(ARGV[7]) and acctAfter > tonumber(ARGV[6]) then return -2 end
  if after > tonumber(ARGV[3]) then return -1 end
end
if new == 0 then redis.call('HDEL', KEYS[1], ARGV[1]) else redis.call('HSET', KEYS[1], ARGV[1], new) end
if acctAfter <= 0 then redis.call('HDEL', KEYS[1], ARGV[5]) else redis.call('HSET', KEYS[1], ARGV[5], acctAfter) end
redis.call('HSET', KEYS[1], '` + budgetTotal + `', after)
return 0
`)

// reserve sets scope's size in the shared budget to size. When grew, and
// the budget (or the scope's account's share of it) has no room for it,
// it fails with b's error for a full budget (or account).
func (r *redisStore) reserve(ctx context.Context, scope string, size int64, grew bool, b *budget) error {
	g := "0"
	if grew {
		g = "1"
	}
	other := int64(0)
	if b != nil {
		other = b.other
	}
	n, err := reserveScript.Run(ctx, r.client, []string{r.budgetKey()}, scope, size, r.budget.max, g, accountField(scope), r.budget.perAccount, other).Int()
	if err != nil {
		return storeError("reserve", err)
	}
	switch n {
	case -1:
		return b.full(b.code)
	case -2:
		return b.accountFull(b.code)
	}
	return nil
}

// budgetUsed reads the sum of the shared budget, what scope holds of it,
// and what scope's account holds of it in all its scopes.
func (r *redisStore) budgetUsed(ctx context.Context, scope string) (sum, own, account int64, err error) {
	vals, err := r.client.HMGet(ctx, r.budgetKey(), budgetTotal, scope, accountField(scope)).Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return 0, 0, 0, storeError("HMGET budget", err)
	}
	n := func(v any) int64 {
		s, _ := v.(string)
		i, _ := strconv.ParseInt(s, 10, 64)
		return i
	}
	if len(vals) == 3 {
		sum, own, account = n(vals[0]), n(vals[1]), n(vals[2])
	}
	return sum, own, account, nil
}
