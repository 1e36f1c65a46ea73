package idempotency

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/obol-gateway/obol/internal/ident"
)

// Unresolved is the connection segment of capability (cap.*) calls, whose
// concrete route is chosen after the key is scoped. No connection may use it.
// The route is resolved before the claim and pinned by its fingerprint, so a
// capability that later resolves elsewhere answers destination_conflict for
// an existing key that would be dispatched again, instead of dispatching
// twice.
const Unresolved = "unresolved"

// DefaultPrefix is the storage key prefix when none is configured.
const DefaultPrefix = "obol:"

// ScopeVersion is the key-scope layout version that this package writes.
// Records of another version are refused, never rewritten.
const ScopeVersion = 1

// Scope is what a key is unique within: a workspace, the resolved connection
// and the tool. A Scope whose Tool starts with "cap." is a capability call; its
// Connection must be empty and renders as [Unresolved].
type Scope struct {
	Workspace  string
	Connection string
	Tool       string
}

// isCapability reports whether the scope is a capability (cap.*) call.
func (s Scope) isCapability() bool { return strings.HasPrefix(s.Tool, "cap.") }

// Validate checks every segment: 1 to 128 bytes of [A-Za-z0-9_.-].
// Segments are validated, not escaped: a ':' would let two tenants render
// the same key, and braces would move the key to another Redis Cluster
// slot.
func (s Scope) Validate() error {
	if err := validSegment("workspace", s.Workspace); err != nil {
		return err
	}
	if s.Tool == "" {
		return fmt.Errorf("%w: tool: must not be empty", ErrInvalidScope)
	}
	if s.isCapability() {
		if s.Connection != "" {
			return fmt.Errorf("%w: connection: a capability call is scoped as %q, not by a connection", ErrInvalidScope, Unresolved)
		}
		return nil
	}
	if s.Connection == Unresolved {
		return fmt.Errorf("%w: connection: %q is reserved for capability calls", ErrInvalidScope, Unresolved)
	}
	return validSegment("connection", s.Connection)
}

func validSegment(field, v string) error {
	if err := ident.Check(v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidScope, field, err)
	}
	return nil
}

// ValidatePrefix checks a storage key prefix: printable ASCII without braces
// (which would change Redis Cluster slot hashing) or spaces, at most 64 bytes.
// The empty prefix is valid.
func ValidatePrefix(p string) error {
	if len(p) > 64 {
		return fmt.Errorf("%w: prefix: longer than 64 bytes", ErrInvalidScope)
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c >= 0x7f || c == '{' || c == '}' {
			return fmt.Errorf("%w: prefix: byte %d is not allowed (no braces, spaces or control bytes)", ErrInvalidScope, i)
		}
	}
	return nil
}

// toolHash is the tool segment of a storage key: xxhash64 of the tool name as
// 16 lowercase hex digits. The route fingerprint names the tool too, so even
// a 64-bit collision cannot reuse another tool's record.
func toolHash(tool string) string {
	var b [16]byte
	h := strconv.AppendUint(b[:0], xxhash.Sum64String(tool), 16)
	const zeros = "0000000000000000"
	return zeros[:16-len(h)] + string(h)
}

// StorageKey renders {prefix}idem:{workspace}:{connection|unresolved}:{hash(tool)}:{key}.
// It validates the prefix, the scope and the key.
func (s Scope) StorageKey(prefix string, k Key) (string, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return "", err
	}
	if err := s.Validate(); err != nil {
		return "", err
	}
	if k.IsZero() {
		return "", fmt.Errorf("%w: zero key", ErrMalformedKey)
	}
	conn := s.Connection
	if s.isCapability() {
		conn = Unresolved
	}
	var b strings.Builder
	b.Grow(len(prefix) + 5 + len(s.Workspace) + 1 + len(conn) + 1 + 16 + 1 + keyLen)
	b.WriteString(prefix)
	b.WriteString("idem:")
	b.WriteString(s.Workspace)
	b.WriteByte(':')
	b.WriteString(conn)
	b.WriteByte(':')
	b.WriteString(toolHash(s.Tool))
	b.WriteByte(':')
	b.WriteString(k.s)
	return b.String(), nil
}
