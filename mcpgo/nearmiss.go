package mcpgo

import (
	"bytes"
	"net/http"
	"unicode"
	"unicode/utf8"

	"github.com/obol-gateway/obol/mcpgateway"
)

// The near-miss rule of mcpgateway (docs/DESIGN.md, "The key" and
// "refserver wire contract"): a key under a name the front does not read
// would be silently ignored, the call given a minted key and its retry
// another, so a name spelled like one the front reads but not exactly it
// is refused as malformed_key. Skeletons compare names: letters and digits
// only, case folded. The published vectors test that both fronts agree.

var (
	stemNamespace = []byte("devobol")
	stemsKey      = [...][]byte{[]byte("idempotencykey"), []byte("idempotencekey"), []byte("idempotentkey")}
	stemTicket    = []byte("approvalticket")
	stemMeta      = []byte("meta")
)

func hasStem(sk []byte) bool {
	for _, st := range stemsKey {
		if bytes.Contains(sk, st) {
			return true
		}
	}
	return bytes.Contains(sk, stemTicket)
}

// nearMissName reports whether a params._meta member name is a near miss.
func nearMissName(name []byte) bool {
	if string(name) == mcpgateway.MetaKey || string(name) == mcpgateway.MetaTicket {
		return false
	}
	sk := skeleton(nil, name)
	return bytes.HasPrefix(sk, stemNamespace) || hasStem(sk)
}

// nearMissContainer reports whether a member name of params other than
// _meta is spelled like _meta.
func nearMissContainer(name []byte) bool {
	return string(name) != "_meta" && bytes.Equal(skeleton(nil, name), stemMeta)
}

// nearMissHeader reports whether h has a field named like the key or the
// ticket other than exactly except ("" makes every such field one).
func nearMissHeader(h http.Header, except string) bool {
	for name := range h {
		if name == except && except != "" {
			continue
		}
		if hasStem(skeleton(nil, []byte(name))) {
			return true
		}
	}
	return false
}

// skeleton appends name's letters and digits, case folded, to dst.
func skeleton(dst, name []byte) []byte {
	for i := 0; i < len(name); {
		r, n := utf8.DecodeRune(name[i:])
		i += n
		if r = foldRune(r); unicode.IsLetter(r) || unicode.IsDigit(r) {
			dst = utf8.AppendRune(dst, r)
		}
	}
	return dst
}

// foldRune is simple case folding to the lower-case form, plus the Turkic
// dotted and dotless i and the fullwidth forms of ASCII.
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
