// Package nearmiss is the near-miss rule of the MCP fronts (mcpgateway and
// mcpgo), one copy for both: a name spelled like one the front reads but not
// exactly it is refused as malformed_key.
package nearmiss

import (
	"bytes"
	"net/http"
	"unicode"
	"unicode/utf8"
)

// A key under a name the gateway does not read would be silently ignored:
// the call gets a minted key, and its retry another one, so the vendor acts
// twice for what the client meant as one call. A ticket under such a name
// opens a new held slot, and its approval a second effect. So the front
// refuses, as malformed_key, every name that is spelled like one it reads but
// is not exactly it (docs/DESIGN.md, "The key" and "refserver wire contract"):
//
//   - a params._meta member whose skeleton starts with "devobol" (anything
//     in our namespace, dev.obol/...) or contains "idempotencykey" (or
//     "idempotencekey", "idempotentkey") or "approvalticket" (a bare
//     idempotency-key, io.modelcontextprotocol/idempotency-key,
//     x-idempotency-key, idempotent_key, ...), other than exactly
//     dev.obol/idempotency-key and dev.obol/approval-ticket. The result
//     names dev.obol/receipt and dev.obol/approval mean nothing in a request
//     and are refused too: a client that sends dev.obol/approval back to
//     resume would open a new held slot;
//   - a member of params whose skeleton is "meta" other than _meta itself
//     (_Meta, meta, __meta__): the key and ticket inside it would be ignored;
//   - a request header field whose skeleton contains one of the key's
//     stems or "approvalticket", other than Idempotency-Key (X-Idempotency-Key,
//     Idempotency_Key, Idempotency-Key-Id). Go's server canonicalizes header
//     names, so the one accepted field arrives as "Idempotency-Key" however
//     the client cased it; any other spelling, "Idempotency_key" included,
//     is a near miss;
//   - any trailer field with one of those stems, Idempotency-Key itself
//     included: the key is read from the header section only.
//
// Names are compared after JSON unescaping, so dev.obol/idempotency\u002dkey
// is the exact name. The rule is about spellings of our names, not about
// other names: progressToken, io.modelcontextprotocol/related-task or a
// vendor's com.example/trace-id pass untouched, as do unrelated headers.
// A lookalike letter of another script in one half of our name
// (dev.оbol/idempotency-key with a Cyrillic о) leaves the stem of the other
// half, so it is still a near miss.
// If the protocol ever reserves io.modelcontextprotocol/idempotency-key, it
// becomes a second accepted spelling of the key, read like ours, never
// ignored.

// Stems of the names, as skeleton leaves them. The key's stem takes the
// word in its three English forms (idempotency, idempotence, idempotent)
// but always with "key": idempotentHint and the like are other names.
var (
	stemNamespace = []byte("devobol")
	stemsKey      = [...][]byte{[]byte("idempotencykey"), []byte("idempotencekey"), []byte("idempotentkey")}
	stemTicket    = []byte("approvalticket")
	stemMeta      = []byte("meta")
)

// hasStem reports whether the skeleton sk contains the stem of the key's or
// the ticket's name.
func hasStem(sk []byte) bool {
	for _, st := range stemsKey {
		if bytes.Contains(sk, st) {
			return true
		}
	}
	return bytes.Contains(sk, stemTicket)
}

// Name reports whether a params._meta member name is a near miss: spelled
// like the key's or the ticket's name (or anything in our namespace) but
// not exactly key or ticket.
func Name(name []byte, key, ticket string) bool {
	if string(name) == key || string(name) == ticket {
		return false
	}
	var buf [64]byte
	sk := Skeleton(buf[:0], name)
	return bytes.HasPrefix(sk, stemNamespace) || hasStem(sk)
}

// Container reports whether a member name of params other than _meta is
// spelled like _meta.
func Container(name []byte) bool {
	var buf [16]byte
	return string(name) != "_meta" && bytes.Equal(Skeleton(buf[:0], name), stemMeta)
}

// Header reports whether h has a field named like Idempotency-Key (or like
// the approval ticket, which no header carries) other than exactly except;
// except "" makes every such field one.
func Header(h http.Header, except string) bool {
	var buf [64]byte
	for name := range h {
		if name == except && except != "" {
			continue
		}
		if hasStem(Skeleton(buf[:0], []byte(name))) {
			return true
		}
	}
	return false
}

// Skeleton appends to dst what is compared with the stems: name's letters
// and digits, case folded (foldRune), in order. Everything else is dropped,
// so separators ("-", "_", ".", "/", space) and what a copy and paste or an
// escape may slip in (NUL and other controls, zero-width and bidi format
// characters, combining marks, invalid UTF-8) never make a name distinct.
func Skeleton(dst, name []byte) []byte {
	for i := 0; i < len(name); {
		c := name[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
				dst = append(dst, c)
			case 'A' <= c && c <= 'Z':
				dst = append(dst, c+'a'-'A')
			}
			continue
		}
		r, n := utf8.DecodeRune(name[i:])
		i += n
		if r = foldRune(r); unicode.IsLetter(r) || unicode.IsDigit(r) {
			dst = utf8.AppendRune(dst, r)
		}
	}
	return dst
}

// foldRune is Unicode simple case folding (strings.EqualFold's, so the
// Kelvin sign K folds to k and the long s to s), to the lower-case form,
// plus what a locale-aware or East Asian input method makes of our ASCII
// names: the Turkic dotted capital I and dotless i fold to i, and the
// fullwidth forms of ASCII to ASCII. Full case folding would add only
// multi-letter expansions (ß to ss, ligatures), which none of the stems can
// come from but the Turkic İ, handled here. Lookalike letters of other
// scripts (Cyrillic а for Latin a) are other letters, not near misses.
func foldRune(r rune) rune {
	switch {
	case r == 'İ' || r == 'ı':
		return 'i'
	case r >= '！' && r <= '～':
		r -= '！' - '!'
	}
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		m = min(m, f)
	}
	return unicode.ToLower(m)
}
