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

// reserveScript sets a scope's size in the budget hash and the sum with
// it. KEYS: the budget hash. ARGV: the scope, its new size (0 removes it),
// the budget's max, and "1" when the change grew the scope. A change that
// grew the scope is refused, answering -1, when the sum would pass max;
// else it answers 0.
var reserveScript = goredis.NewScript(`
local old = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local sum = tonumber(redis.call('HGET', KEYS[1], '` + budgetTotal + `') or '0')
local new = tonumber(ARGV[2])
local after = sum - old + new
if ARGV[4] == '1' and new > old and after > tonumber(ARGV[3]) then return -1 end
if new == 0 then redis.call('HDEL', KEYS[1], ARGV[1]) else redis.call('HSET', KEYS[1], ARGV[1], new) end
redis.call('HSET', KEYS[1], '` + budgetTotal + `', after)
return 0
`)

// reserve sets scope's size in the shared budget to size. When grew, and
// the budget has no room for it, it fails with b's error for a full
// budget.
func (r *redisStore) reserve(ctx context.Context, scope string, size int64, grew bool, b *budget) error {
	g := "0"
	if grew {
		g = "1"
	}
	n, err := reserveScript.Run(ctx, r.client, []string{r.budgetKey()}, scope, size, r.budget.max, g).Int()
	if err != nil {
		return storeError("reserve", err)
	}
	if n < 0 {
		return b.full(b.code)
	}
	return nil
}

// budgetUsed reads the sum of the shared budget and what scope holds of
// it.
func (r *redisStore) budgetUsed(ctx context.Context, scope string) (sum, own int64, err error) {
	vals, err := r.client.HMGet(ctx, r.budgetKey(), budgetTotal, scope).Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return 0, 0, storeError("HMGET budget", err)
	}
	n := func(v any) int64 {
		s, _ := v.(string)
		i, _ := strconv.ParseInt(s, 10, 64)
		return i
	}
	if len(vals) == 2 {
		sum, own = n(vals[0]), n(vals[1])
	}
	return sum, own, nil
}
