package receipt

import (
	"cmp"
	"encoding/base64"
	"slices"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// MinSecretLen is the length in bytes below which a secret is refused
// (ErrShortSecret): replacing a shorter string in a vendor's answer would
// corrupt it.
const MinSecretLen = 8

// Redacted is what a Redactor writes in place of a secret. It holds no quote
// and no backslash, so a JSON string stays a JSON string.
const Redacted = "[redacted]"

// CheckSecret returns ErrShortSecret if s is shorter than MinSecretLen,
// else nil. The caller wraps it with the name of the field s came from.
func CheckSecret(s string) error {
	if len(s) < MinSecretLen {
		return ErrShortSecret
	}
	return nil
}

// Redactor replaces known secrets: in text meant for logs and errors, and in a
// vendor's answer before it is stored or returned (docs/DESIGN.md, "Attempts
// and retries").
//
// It finds a secret in every form in which a vendor's echo is likely to hold
// it:
//
//   - as is;
//   - JSON-escaped as encoders write it: with or without HTML escapes
//     (\u003c for <), "/" as "\/" or not, non-ASCII as \uXXXX or not, hex
//     digits in either case; and such a form escaped once more (a JSON
//     document echoed inside a JSON string);
//   - inside base64 (standard or URL alphabet, "/" JSON-escaped or not): the
//     characters that encode the secret's bytes alone, at each of the three
//     alignments, so the secret is found in the base64 of any text holding
//     it, such as an HTTP Basic credential base64(user ":" secret),
//     base64(secret ":") or base64(":" secret). Only the few bits of its
//     first and last byte that share a character with the text around it
//     remain. Base64 forms are searched for secrets of MinSecretLen bytes or
//     more only: a shorter secret's would match ordinary text.
//
// Each run of text covered by one or more overlapping matches becomes one
// Redacted, together with a backslash that escapes the run's first byte, so
// that JSON stays valid JSON for a secret without quotes, backslashes or
// control characters. Should a secret appear again across an inserted
// Redacted (a secret that shares characters with it), the text is scrubbed
// again, and after a few rounds replaced whole by Redacted.
//
// Text people write ([Redactor.StringFold]) may hold a secret retyped in
// another case: there every form is also found up to ASCII case.
//
// The zero Redactor changes nothing. A Redactor is safe for concurrent use.
type Redactor struct{ m *matcher }

// matcher holds every form of every secret, by first byte, longest first,
// so that at each position the longest match is found first.
type matcher struct {
	by [256][]string
	// pairs has bit a<<8|b set when a form starts with the bytes a, b (or
	// is the one byte a): most positions are passed over on one lookup.
	pairs [1 << 16 / 64]uint64
	// fold, when set, matches up to ASCII case: its forms are lower case
	// and the text is compared lowered.
	fold bool
	// folded is this matcher's forms lowered, for StringFold: built on its
	// first use, so that a Redactor that only scrubs vendor answers never
	// pays for it.
	folded     *matcher
	foldedOnce sync.Once
	forms      []string
}

func (m *matcher) mayStart(a, b byte) bool {
	i := uint16(a)<<8 | uint16(b)
	return m.pairs[i/64]&(1<<(i%64)) != 0
}

// NewRedactor returns a Redactor for the given secrets; empty values are
// ignored. It accepts secrets shorter than MinSecretLen, for text meant for
// logs; a caller that scrubs a vendor's answer refuses those first with
// CheckSecret.
func NewRedactor(secrets ...string) Redactor {
	var all []string
	for _, s := range secrets {
		if s != "" {
			all = append(all, forms(s)...)
		}
	}
	if len(all) == 0 {
		return Redactor{}
	}
	// Longest first, so that at each position the longest match is found
	// first; equal strings end up adjacent.
	return Redactor{m: newMatcher(all, false)}
}

// newMatcher indexes forms; with fold, their lower-case forms.
func newMatcher(forms []string, fold bool) *matcher {
	all := forms
	if fold {
		all = make([]string, len(forms))
		for i, f := range forms {
			all[i] = lowerASCII(f)
		}
	}
	slices.SortFunc(all, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	all = slices.Compact(all)
	m := &matcher{fold: fold, forms: all}
	for _, f := range all {
		m.by[f[0]] = append(m.by[f[0]], f)
		lo, hi := uint16(f[0])<<8, uint16(f[0])<<8|0xff
		if len(f) > 1 {
			lo = lo | uint16(f[1])
			hi = lo
		}
		for i := int(lo); i <= int(hi); i++ {
			m.pairs[i/64] |= 1 << (i % 64)
		}
	}
	return m
}

// lowerASCII lowers the ASCII letters of s only: the bytes keep their
// positions, so a match in the lowered text is a match in the text.
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = lower(c)
	}
	return string(b)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// String returns s with every secret replaced by Redacted.
func (r Redactor) String(s string) string {
	if r.m == nil {
		return s
	}
	out, ok := redact(r.m, s)
	if !ok {
		return s
	}
	return string(r.m.settle(out))
}

// StringFold is String for text people write, such as a settle note: a
// secret is also found in any mix of ASCII upper and lower case, in each
// of its forms (an API key retyped in capitals, a JSON-escaped copy with
// its hex digits in either case). Vendor answers keep String's exact
// match: a vendor echoes what it was sent.
func (r Redactor) StringFold(s string) string {
	if r.m == nil {
		return s
	}
	m := r.m.foldMatcher()
	out, ok := redact(m, s)
	if !ok {
		return s
	}
	return string(m.settle(out))
}

// foldMatcher returns the case-folding matcher of m's forms.
func (m *matcher) foldMatcher() *matcher {
	if m.fold {
		return m
	}
	m.foldedOnce.Do(func() { m.folded = newMatcher(m.forms, true) })
	return m.folded
}

// Bytes returns b with every secret replaced by Redacted. When no secret is
// found it returns b itself, without allocating; otherwise a new slice, and
// b is not modified.
func (r Redactor) Bytes(b []byte) []byte {
	if r.m == nil {
		return b
	}
	out, ok := redact(r.m, b)
	if !ok {
		return b
	}
	return r.m.settle(out)
}

// settle scrubs out again until no secret is found: a secret can reappear
// only across an inserted Redacted, so this loop runs once in practice.
func (m *matcher) settle(out []byte) []byte {
	for range 3 {
		next, ok := redact(m, out)
		if !ok {
			return out
		}
		out = next
	}
	return []byte(Redacted)
}

// redact replaces each run covered by matches with Redacted, in one pass. It
// reports false, and allocates nothing, when nothing matched.
func redact[T string | []byte](m *matcher, s T) ([]byte, bool) {
	var out []byte
	copied, start, end := 0, 0, -1 // the current run is s[start:end]; none while end < 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if m.fold {
			c = lower(c)
		}
		if i+1 < len(s) {
			next := s[i+1]
			if m.fold {
				next = lower(next)
			}
			if !m.mayStart(c, next) {
				continue
			}
		}
		for _, f := range m.by[c] {
			if len(f) > len(s)-i {
				continue
			}
			if m.fold {
				if !foldEqual(s[i:i+len(f)], f) {
					continue
				}
			} else if string(s[i:i+len(f)]) != f {
				continue
			}
			e := i + len(f)
			if i <= end { // overlaps or touches the current run
				end = max(end, e)
				break
			}
			if end >= 0 {
				out = append(append(out, s[copied:start]...), Redacted...)
				copied = end
			}
			start, end = i, e
			if escaped(s, copied, i) {
				start-- // a JSON escape's backslash goes with the run
			}
			break
		}
	}
	if end < 0 {
		return nil, false
	}
	out = append(append(out, s[copied:start]...), Redacted...)
	return append(out, s[end:]...), true
}

// foldEqual reports whether t, lowered, is the lower-case form f.
func foldEqual[T string | []byte](t T, f string) bool {
	for i := 0; i < len(f); i++ {
		if lower(t[i]) != f[i] {
			return false
		}
	}
	return true
}

// escaped reports whether s[i] follows an odd number of backslashes, none of
// them before from.
func escaped[T string | []byte](s T, from, i int) bool {
	n := 0
	for j := i - 1; j >= from && s[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// forms returns the forms of s that a Redactor searches for.
func forms(s string) []string {
	out := jsonForms(s)
	if len(s) >= MinSecretLen {
		out = append(out, base64Cores(s)...)
	}
	return out
}

// jsonForms returns s and its JSON string forms, escaped once and twice.
func jsonForms(s string) []string {
	out := []string{s}
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r >= utf8.RuneSelf || strings.ContainsRune(`"\/<>&`, r) }) {
		return out // every JSON form is s itself
	}
	for m := range 16 {
		f := string(appendJSON(nil, s, jsonStyle{html: m&1 != 0, slash: m&2 != 0, ascii: m&4 != 0, upper: m&8 != 0}))
		out = append(out, f,
			string(appendJSON(nil, f, jsonStyle{html: true})),
			string(appendJSON(nil, f, jsonStyle{html: true, slash: true})))
	}
	return out
}

// base64Cores returns, for each alignment k of s within base64's 3-byte
// groups, the characters of base64(k bytes + s) that encode bits of s alone.
// Character j encodes bits [6j, 6j+6); s occupies bits [8k, 8(k+len(s))).
func base64Cores(s string) []string {
	var out []string
	buf := make([]byte, 2+len(s))
	for k := range 3 {
		b := buf[2-k:]
		copy(b[k:], s)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			core := enc.EncodeToString(b)[(8*k+5)/6 : 8*(k+len(s))/6]
			out = append(out, core)
			if strings.Contains(core, "/") {
				out = append(out, strings.ReplaceAll(core, "/", `\/`))
			}
		}
	}
	return out
}

// jsonStyle is how an encoder writes a JSON string.
type jsonStyle struct {
	html  bool // <, > and & as \u003c, \u003e, \u0026 (encoding/json's default)
	slash bool // "/" as "\/" (PHP, some Java encoders)
	ascii bool // every non-ASCII rune as \uXXXX (Python's default)
	upper bool // upper-case hex digits in \u escapes
}

// appendJSON appends the JSON string form of s, without the quotes. Like
// encoding/json it writes invalid UTF-8 as \ufffd and always escapes U+2028
// and U+2029.
func appendJSON(dst []byte, s string, st jsonStyle) []byte {
	hex := "0123456789abcdef"
	if st.upper {
		hex = "0123456789ABCDEF"
	}
	u := func(r rune) {
		dst = append(dst, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '/' && st.slash:
				dst = append(dst, '\\', '/')
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c == '\b':
				dst = append(dst, '\\', 'b')
			case c == '\f':
				dst = append(dst, '\\', 'f')
			case c < 0x20 || st.html && (c == '<' || c == '>' || c == '&'):
				u(rune(c))
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			u(utf8.RuneError)
		case r == '\u2028' || r == '\u2029' || st.ascii && r <= 0xffff:
			u(r)
		case st.ascii:
			r1, r2 := utf16.EncodeRune(r)
			u(r1)
			u(r2)
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return dst
}
