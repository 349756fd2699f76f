package cloudmap

// CacheUse is what a Registry holds in memory of its state: the scopes
// (an account's registry in one region) and their size as the registry
// estimates it (as Limits.UnknownBytes counts it). A registry over the
// embedded store or Redis keeps it within Options.CacheBytes or
// Options.RedisCacheBytes (one scope being used may take it past); an
// in-memory registry holds every scope.
type CacheUse struct {
	Scopes int
	Bytes  int64
}

// CacheUse reports what r holds in memory now.
func (r *Registry) CacheUse() CacheUse {
	switch s := r.store.(type) {
	case *boltStore:
		s.mem.mu.RLock()
		defer s.mem.mu.RUnlock()
		return CacheUse{Scopes: s.lru.Len(), Bytes: s.held}
	case *redisStore:
		s.mu.Lock()
		defer s.mu.Unlock()
		return CacheUse{Scopes: len(s.scopes), Bytes: s.bytes}
	case *memStore:
		s.mu.RLock()
		defer s.mu.RUnlock()
		u := CacheUse{Scopes: len(s.scopes)}
		for _, st := range s.scopes {
			u.Bytes += st.size
		}
		return u
	}
	return CacheUse{}
}
