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
// text of RequestHash. A Store derives the vendor key once, when it creates
// the record, and stores it: every attempt of the slot sends the same one.
func VendorKey(deployment string, scope Scope, key Key, requestHash string) Key {
	conn := scope.Connection
	if scope.IsCapability() {
		conn = Unresolved
	}
	h := sha256.New()
	for i, part := range [...]string{vendorKeyDomain, deployment, scope.Workspace, conn,
		ToolHash(scope.Tool), key.s, requestHash} {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(part))
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return Key{s: keyPrefix + hex.EncodeToString(sum[:keyHexLen/2])}
}

// NewDeploymentID mints a deployment id: 32 lowercase hex digits from
// crypto/rand, made once per fleet and kept by its Store.
func NewDeploymentID() string { return NewKey().s[len(keyPrefix):] }

// ValidDeploymentID reports whether s is 32 lowercase hex digits.
func ValidDeploymentID(s string) bool { return validKey(keyPrefix + s) }
