package redisstore

import (
	"encoding/json"
	"hash/maphash"
	"strings"
	"sync/atomic"

	"github.com/obol-gateway/obol/idempotency"
)

// scopeCacheSize is the number of scopes whose strings a [Store] keeps:
// direct-mapped, so a gateway of many scopes only recomputes more often.
const scopeCacheSize = 256

// scopeStrings are the parts of a scope's keys and index member that every
// claim and finalize of the scope writes again: the storage key up to the
// key (after [idempotency.Scope.StorageKey] validated the scope), the unknown
// index and pending buckets up to the slot's tag, and the index member up
// to the key.
type scopeStrings struct {
	scope                   idempotency.Scope
	keyBase                 string
	bucketBase, pendingBase string
	memberBase              string
	vendor                  idempotency.VendorKeys
}

// scopeCache maps a scope to its scopeStrings. Lock-free: an entry is
// replaced whole, and a reader compares the scope it finds.
type scopeCache struct {
	seed    maphash.Seed
	entries [scopeCacheSize]atomic.Pointer[scopeStrings]
}

func newScopeCache() *scopeCache { return &scopeCache{seed: maphash.MakeSeed()} }

// strings returns the strings of scope, computing them (and validating the
// scope and the prefix) on a miss. A key is needed to render a storage key
// once; its error is StorageKey's.
func (c *scopeCache) strings(prefix, deployment string, scope idempotency.Scope, k idempotency.Key) (*scopeStrings, error) {
	slot := &c.entries[maphash.Comparable(c.seed, scope)%scopeCacheSize]
	if e := slot.Load(); e != nil && e.scope == scope {
		return e, nil
	}
	key, err := scope.StorageKey(prefix, k)
	if err != nil {
		return nil, err
	}
	m, err := json.Marshal(indexMember{scope.Connection, scope.Tool, ""})
	if err != nil {
		return nil, err
	}
	e := &scopeStrings{
		scope:       scope,
		keyBase:     strings.TrimSuffix(key, k.String()),
		bucketBase:  bucketBase(prefix, scope.Workspace),
		pendingBase: pendingBase(prefix, scope.Workspace),
		memberBase:  strings.TrimSuffix(string(m), `"}`),
		vendor:      idempotency.NewVendorKeys(deployment, scope),
	}
	slot.Store(e)
	return e, nil
}

// storageKey is scope.StorageKey(s.prefix, k), from the cache: a key is
// rendered as the scope's base and the key's text.
func (s *Store) storageKey(scope idempotency.Scope, k idempotency.Key) (string, *scopeStrings, error) {
	if k.IsZero() {
		_, err := scope.StorageKey(s.prefix, k) // its error
		return "", nil, err
	}
	e, err := s.scopes.strings(s.prefix, s.deployment, scope, k)
	if err != nil {
		return "", nil, err
	}
	return e.keyBase + k.String(), e, nil
}

// member is the index member of key (indexMember, as JSON): a key's text
// needs no escaping.
func (e *scopeStrings) member(k idempotency.Key) string {
	return e.memberBase + k.String() + `"}`
}

// bucket is the unknown index bucket of the records in slot (bucketKey).
func (e *scopeStrings) bucket(slot int) string {
	return e.bucketBase + slotTags()[slot] + "}"
}

// pending is the pending approvals bucket of the records in slot
// (pendingBucket).
func (e *scopeStrings) pending(slot int) string {
	return e.pendingBase + slotTags()[slot] + "}"
}

// vendorKey is packKey(idempotency.VendorKey(deployment, scope, k,
// requestHash)): the 16 bytes a record keeps.
func (e *scopeStrings) vendorKey(k idempotency.Key, requestHash string) string {
	raw := e.vendor.Raw(k, requestHash)
	return string(raw[:])
}
