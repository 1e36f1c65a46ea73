package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
)

// vendorKeyDomain separates vendor keys from every other use of SHA-256 in
// the gateway; the version moves when the derivation does.
const vendorKeyDomain = "obol/vendor-key/v2"

// VendorKey is the key that header and body_pointer propagation send to the
// vendor for the slot of scope and key (docs/DESIGN.md, "The key on the vendor
// hop"). It is derived from the whole slot, so two workspaces that share a
// vendor account through one connection, two fleets on one account, or a key
// reused after retention with other arguments never meet at the vendor: a
// vendor that deduplicates on the key it receives (as Stripe does) can never
// answer one tenant's call with another's result. The client's key never
// reaches the vendor.
//
// deployment is the fleet's DeploymentID; requestHash is the "sha256:..."
// text of [RequestHash]. A [Store] derives the vendor key once, when it creates
// the record, and stores it: every attempt of the slot sends the same one.
func VendorKey(deployment string, scope Scope, key Key, requestHash string) Key {
	return NewVendorKeys(deployment, scope).Key(key, requestHash)
}

// VendorKeys derives the vendor keys of one scope ([VendorKey]) with the
// scope's part of the input made once: a [Store] that writes a scope again and
// again keeps one. The zero value is not usable; make one with
// NewVendorKeys.
type VendorKeys struct {
	base string // the input up to the key: each part then a zero byte
}

// NewVendorKeys returns the vendor keys of scope in fleet deployment.
func NewVendorKeys(deployment string, scope Scope) VendorKeys {
	conn := scope.Connection
	if scope.isCapability() {
		conn = Unresolved
	}
	return VendorKeys{base: vendorKeyDomain + "\x00" + deployment + "\x00" + scope.Workspace + "\x00" + conn + "\x00" +
		toolHash(scope.Tool) + "\x00"}
}

// Key is [VendorKey] of the scope, key and requestHash.
func (v VendorKeys) Key(key Key, requestHash string) Key {
	sum := v.sum(key, requestHash)
	return Key{s: keyPrefix + hex.EncodeToString(sum[:keyHexLen/2])}
}

// Raw is [VendorKeys.Key]'s 16 bytes, as a record stores them, without the hex text.
func (v VendorKeys) Raw(key Key, requestHash string) [keyHexLen / 2]byte {
	sum := v.sum(key, requestHash)
	return [keyHexLen / 2]byte(sum[:keyHexLen/2])
}

func (v VendorKeys) sum(key Key, requestHash string) [sha256.Size]byte {
	var buf [256]byte // one buffer, on the stack for every scope but huge ones
	b := append(buf[:0], v.base...)
	b = append(append(append(b, key.s...), 0), requestHash...)
	return sha256.Sum256(b)
}

// NewDeploymentID mints a deployment id: 32 lowercase hex digits from
// crypto/rand, made once per fleet and kept by its [Store].
func NewDeploymentID() string { return NewKey().s[len(keyPrefix):] }

// validDeploymentID reports whether s is 32 lowercase hex digits.
func validDeploymentID(s string) bool { return validKey(keyPrefix + s) }
