package servicequotas

import (
	"context"
	"errors"
	"maps"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/awsjson"
)

// The refusals of tag, the same from both backends.
func errTagsPerQuota(have, adding int) error {
	return errTooManyTags("the quota has " + strconv.Itoa(have) + " tags and this would add " + strconv.Itoa(adding) +
		"; a quota may have at most " + strconv.Itoa(MaxTagsPerQuota))
}

func errTaggedPerAccount() error {
	return errTooManyTags("this account has tags on " + strconv.Itoa(MaxTaggedPerAccount) +
		" quotas, the most allowed; remove the tags of one first")
}

func errTaggedUnmapped() error {
	return errTooManyTags("access keys the config does not map to an account have tags on " + strconv.Itoa(MaxTaggedUnmapped) +
		" quotas together, the most allowed; ask the operator to map your access key")
}

func (m *memoryBackend) tags(_ context.Context, res tagRes) (map[string]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.tagSets[res.key]), nil
}

func (m *memoryBackend) tag(_ context.Context, res tagRes, tags map[string]string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.tagSets[res.key]
	adding := 0
	for k := range tags {
		if _, ok := cur[k]; !ok {
			adding++
		}
	}
	if len(cur)+adding > MaxTagsPerQuota {
		return errTagsPerQuota(len(cur), adding)
	}
	if cur == nil {
		if m.tagged[res.account] >= MaxTaggedPerAccount {
			return errTaggedPerAccount()
		}
		if res.unmapped && len(m.unmappedTagged) >= MaxTaggedUnmapped {
			return errTaggedUnmapped()
		}
		cur = make(map[string]string, len(tags))
		m.tagSets[res.key] = cur
		m.tagged[res.account]++
		if res.unmapped {
			m.unmappedTagged[res.key] = true
		}
	}
	maps.Copy(cur, tags)
	m.note(recTags, res.key, "")
	return nil
}

func (m *memoryBackend) untag(_ context.Context, res tagRes, keys []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.tagSets[res.key]
	if cur == nil {
		return nil
	}
	for _, k := range keys {
		delete(cur, k)
	}
	m.note(recTags, res.key, "")
	if len(cur) == 0 {
		delete(m.tagSets, res.key)
		if m.tagged[res.account]--; m.tagged[res.account] <= 0 {
			delete(m.tagged, res.account)
		}
		delete(m.unmappedTagged, res.key)
	}
	return nil
}

// Tags in Redis:
//
//	tags:KEY          hash: a quota ARN's tags, KEY its appliedKey
//	tagged:ACCOUNT    set: the account's tagged KEYs
//	tagged:unmapped   set: the KEYs unmapped accounts tagged

// redisTag adds tags: ARGV prefix, account, key, unmapped (1 or 0), the
// three bounds, then keys and values.
var redisTag = redis.NewScript(`
local p, acct, res = ARGV[1], ARGV[2], ARGV[3]
local unmapped = ARGV[4] == '1'
local tk = p..'tags:'..res
local n = redis.call('HLEN', tk)
local adding = 0
for i = 8, #ARGV, 2 do
  if redis.call('HEXISTS', tk, ARGV[i]) == 0 then adding = adding + 1 end
end
if n + adding > tonumber(ARGV[5]) then return {'tags', tostring(n), tostring(adding)} end
if n == 0 then
  if redis.call('SCARD', p..'tagged:'..acct) >= tonumber(ARGV[6]) then return {'account'} end
  if unmapped and redis.call('SCARD', p..'tagged:unmapped') >= tonumber(ARGV[7]) then return {'unmapped'} end
end
redis.call('HSET', tk, unpack(ARGV, 8))
redis.call('SADD', p..'tagged:'..acct, res)
if unmapped then redis.call('SADD', p..'tagged:unmapped', res) end
return {'ok'}
`)

// redisUntag removes tags: ARGV prefix, account, key, then the tag keys.
var redisUntag = redis.NewScript(`
local p, acct, res = ARGV[1], ARGV[2], ARGV[3]
local tk = p..'tags:'..res
redis.call('HDEL', tk, unpack(ARGV, 4))
if redis.call('HLEN', tk) == 0 then
  redis.call('SREM', p..'tagged:'..acct, res)
  redis.call('SREM', p..'tagged:unmapped', res)
end
return 0
`)

func (b *redisBackend) tags(ctx context.Context, res tagRes) (map[string]string, error) {
	t, err := b.rdb.HGetAll(ctx, redisPrefix+"tags:"+res.key).Result()
	if err != nil {
		return nil, storeErr("read tags", err)
	}
	return t, nil
}

func (b *redisBackend) tag(ctx context.Context, res tagRes, tags map[string]string) error {
	args := make([]any, 0, 7+2*len(tags))
	args = append(args, redisPrefix, res.account, res.key, bit(res.unmapped), MaxTagsPerQuota, MaxTaggedPerAccount, MaxTaggedUnmapped)
	for k, v := range tags {
		args = append(args, k, v)
	}
	out, err := redisTag.Run(ctx, b.rdb, []string{redisPrefix + "tags:" + res.key}, args...).StringSlice()
	if err != nil {
		return storeErr("tag quota", err)
	}
	switch out[0] {
	case "ok":
		return nil
	case "tags":
		have, _ := strconv.Atoi(out[1])
		adding, _ := strconv.Atoi(out[2])
		return errTagsPerQuota(have, adding)
	case "account":
		return errTaggedPerAccount()
	case "unmapped":
		return errTaggedUnmapped()
	}
	return storeErr("tag quota", errors.New("script answered "+awsjson.Clip(out[0])))
}

func (b *redisBackend) untag(ctx context.Context, res tagRes, keys []string) error {
	args := make([]any, 0, 3+len(keys))
	args = append(args, redisPrefix, res.account, res.key)
	for _, k := range keys {
		args = append(args, k)
	}
	if err := redisUntag.Run(ctx, b.rdb, []string{redisPrefix + "tags:" + res.key}, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return storeErr("untag quota", err)
	}
	return nil
}
