// Package jsonwire writes JSON by hand exactly as encoding/json.Marshal
// does, for encoders on a call's path that must match its bytes without its
// reflection (the receipt, the direct path's MCP result).
package jsonwire

import "encoding/json"

// verbatim marks the bytes encoding/json writes unescaped in a string:
// printable ASCII but the quote, the backslash and, as Marshal escapes
// HTML, '<', '>' and '&'.
var verbatim = func() (v [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		v[c] = true
	}
	v['"'], v['\\'], v['<'], v['>'], v['&'] = false, false, false, false, false
	return v
}()

// AppendString appends s as encoding/json.Marshal writes a string. A string
// with any byte to escape goes to encoding/json itself, whose escapes
// (\u003c, \u2028, \ufffd for invalid UTF-8, ...) are the contract.
func AppendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !verbatim[s[i]] {
			q, _ := json.Marshal(s) // a string never fails
			return append(dst, q...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
