package idempotency

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

const (
	keyPrefix = "idt_"
	keyHexLen = 32
	keyLen    = len(keyPrefix) + keyHexLen
)

// Key is an idempotency key: "idt_" followed by 32 lowercase hex digits.
// The zero Key is not a valid key; IsZero reports it.
type Key struct{ s string }

// NewKey mints a key from 128 bits of crypto/rand.
func NewKey() Key {
	var b [keyHexLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand.Read does not fail on supported platforms (Go 1.24+ panics
		// inside it instead); keep the invariant explicit.
		panic("idempotency: crypto/rand failed: " + err.Error())
	}
	return Key{s: keyPrefix + hex.EncodeToString(b[:])}
}

// ParseKey accepts the bare form (idt_5c1f...) and the Structured Field string
// form ("idt_5c1f...") of the IETF Idempotency-Key draft. Anything else,
// including surrounding whitespace, upper-case hex or parameters, is
// ErrMalformedKey.
func ParseKey(s string) (Key, error) {
	raw := s
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	if !validKey(s) {
		return Key{}, fmt.Errorf("%w: want idt_ followed by 32 lowercase hex digits, got %s", ErrMalformedKey, describe(raw))
	}
	return Key{s: s}, nil
}

func validKey(s string) bool {
	if len(s) != keyLen || s[:len(keyPrefix)] != keyPrefix {
		return false
	}
	for i := len(keyPrefix); i < keyLen; i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// describe renders untrusted input for an error message without echoing it
// whole: a malformed key may be a secret pasted into the wrong header.
func describe(s string) string {
	if len(s) == 0 {
		return "an empty value"
	}
	return fmt.Sprintf("%d bytes", len(s))
}

// String returns the bare form, or "" for the zero [Key].
func (k Key) String() string { return k.s }

// IsZero reports whether k is the zero [Key].
func (k Key) IsZero() bool { return k.s == "" }

// KeySource says where the effective key came from.
type KeySource string

const (
	KeySupplied KeySource = "supplied"
	KeyMinted   KeySource = "minted"
)

// FromHeader resolves the effective key from the values of the
// Idempotency-Key header fields (http.Header.Values): none mints a key, one is
// parsed, more than one is [ErrMalformedKey].
func FromHeader(values []string) (Key, KeySource, error) {
	switch len(values) {
	case 0:
		return NewKey(), KeyMinted, nil
	case 1:
		k, err := ParseKey(values[0])
		if err != nil {
			return Key{}, "", err
		}
		return k, KeySupplied, nil
	}
	return Key{}, "", fmt.Errorf("%w: %d Idempotency-Key header fields, want at most one", ErrMalformedKey, len(values))
}

const ticketPrefix = "apt_"

// NewTicketID mints an approval ticket id: "apt_" + 32 hex from crypto/rand.
func NewTicketID() string { return ticketPrefix + NewKey().s[len(keyPrefix):] }

// ValidTicketID reports whether s has the form of a ticket id.
func ValidTicketID(s string) bool {
	return len(s) == keyLen && s[:len(ticketPrefix)] == ticketPrefix && validKey(keyPrefix+s[len(ticketPrefix):])
}

// NewOpID mints an operation id for a mutating store call.
func NewOpID() string { return NewKey().s[len(keyPrefix):] }
