// Package secrettest finds secrets in what a test collected (answers, stored
// records, logs), in the forms a vendor's echo may hold them, independently
// of the receipt.Redactor that is meant to remove them.
package secrettest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/alicebob/miniredis/v2"

	"github.com/obol-gateway/obol/idempotency/redisstore"
)

// JSONForms are the JSON string forms of s (without quotes) that real
// encoders write: encoding/json with and without HTML escapes, with "/" as
// "\/", with upper-case hex digits, non-ASCII as \uXXXX (Python), and a JSON
// document holding s echoed inside a JSON string.
func JSONForms(s string) []string {
	inner := func(b []byte) string { b = bytes.TrimSpace(b); return string(b[1 : len(b)-1]) }
	html, _ := json.Marshal(s)
	var plain bytes.Buffer
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	h, p := inner(html), inner(plain.Bytes())
	forms := []string{h, p, strings.ReplaceAll(h, "/", `\/`), strings.ReplaceAll(p, "/", `\/`), upperHex(h)}
	var py strings.Builder
	for _, r := range p {
		switch {
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			py.WriteString(escapeRune(r1) + escapeRune(r2))
		case r > 0x7f:
			py.WriteString(escapeRune(r))
		default:
			py.WriteRune(r)
		}
	}
	forms = append(forms, py.String())
	twice, _ := json.Marshal(`{"token":"` + h + `"}`)
	return append(forms, inner(twice))
}

// upperHex writes the hex digits of the \u escapes of the JSON string j in
// upper case.
func upperHex(j string) string {
	b := []byte(j)
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\\' {
			if b[i+1] == 'u' && i+6 <= len(b) {
				copy(b[i+2:i+6], strings.ToUpper(string(b[i+2:i+6])))
				i += 5
			} else {
				i++
			}
		}
	}
	return string(b)
}

func escapeRune(r rune) string {
	const hex = "0123456789abcdef"
	return `\u` + string([]byte{hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf]})
}

// Decodes reports whether some run of base64 characters in b, at some
// alignment, in either alphabet, with "\/" read as "/", decodes to bytes
// holding want.
func Decodes(b []byte, want string) bool {
	b = bytes.ReplaceAll(b, []byte(`\/`), []byte("/"))
	for _, alpha := range []struct {
		enc   *base64.Encoding
		extra string
	}{{base64.RawStdEncoding, "+/"}, {base64.RawURLEncoding, "-_"}} {
		in := func(c byte) bool {
			return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte(alpha.extra, c) >= 0
		}
		for i := 0; i < len(b); {
			if !in(b[i]) {
				i++
				continue
			}
			j := i
			for j < len(b) && in(b[j]) {
				j++
			}
			for shift := 0; shift < 4 && i+shift < j; shift++ {
				run := b[i+shift : j]
				if len(run)%4 == 1 {
					run = run[:len(run)-1] // not a whole byte
				}
				dec := make([]byte, alpha.enc.DecodedLen(len(run)))
				n, err := alpha.enc.Decode(dec, run)
				if err == nil && bytes.Contains(dec[:n], []byte(want)) {
					return true
				}
			}
			i = j
		}
	}
	return false
}

// Leak names the form in which b holds one of secrets ("raw", "json FORM",
// "base64"), or returns "" when it holds none.
func Leak(b []byte, secrets ...string) string {
	for _, s := range secrets {
		if bytes.Contains(b, []byte(s)) {
			return "raw"
		}
		for _, f := range JSONForms(s) {
			if bytes.Contains(b, []byte(f)) {
				return "json " + f
			}
		}
		if Decodes(b, s) {
			return "base64"
		}
	}
	return ""
}

// DumpRedis returns every key of m with every field, member and value.
func DumpRedis(t testing.TB, m *miniredis.Miniredis) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, k := range m.Keys() {
		b.WriteString(k + "\n")
		var vals []string
		switch typ := m.Type(k); typ {
		case "hash":
			fields, _ := m.HKeys(k)
			for _, f := range fields {
				vals = append(vals, f+"="+m.HGet(k, f))
			}
		case "string":
			v, _ := m.Get(k)
			vals = []string{v}
			// A record's body is stored compressed: scan it as the store
			// would replay it too.
			if fields, err := redisstore.RecordFields(v); err == nil {
				vals = append(vals, fields...)
			}
		case "set":
			vals, _ = m.Members(k)
		case "zset":
			vals, _ = m.ZMembers(k)
		case "list":
			vals, _ = m.List(k)
		default:
			t.Fatalf("secrettest: key %s of type %s cannot be dumped", k, typ)
		}
		for _, v := range vals {
			b.WriteString("  " + v + "\n")
		}
	}
	return b.Bytes()
}
