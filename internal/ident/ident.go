// Package ident checks the names that make up storage keys, pins and
// configuration: workspaces, connections, providers, tools and capabilities.
// A name is 1 to MaxLen bytes of [A-Za-z0-9_.-], the MCP tool name alphabet.
// Names are checked, never escaped: a ':' would let two tenants render the
// same storage key, and braces would move it to another Redis Cluster slot.
package ident

import (
	"errors"
	"fmt"
)

// MaxLen is the longest name, in bytes.
const MaxLen = 128

// errEmpty and errLong read as the tail of "field: ...", so they carry no
// package prefix.
var (
	errEmpty = errors.New("must not be empty")
	errLong  = fmt.Errorf("longer than %d bytes", MaxLen)
)

// Check returns why s is not a name, or nil. The error is meant to follow a
// field name ("workspace: byte 3 is not in [A-Za-z0-9_.-]"), so it has no
// package prefix; it names the offending byte's index and never quotes s.
func Check(s string) error {
	switch {
	case s == "":
		return errEmpty
	case len(s) > MaxLen:
		return errLong
	}
	if i := badByte(s); i >= 0 {
		return fmt.Errorf("byte %d is not in [A-Za-z0-9_.-]", i)
	}
	return nil
}

// Valid reports whether s is a name.
func Valid(s string) bool {
	return s != "" && len(s) <= MaxLen && badByte(s) < 0
}

// badByte returns the index of the first byte of s outside the alphabet, or -1.
func badByte(s string) int {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '_', c == '.', c == '-':
		default:
			return i
		}
	}
	return -1
}
