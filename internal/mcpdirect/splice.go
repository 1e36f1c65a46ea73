package mcpdirect

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// SpliceMin is the size from which a vendor body's text is written in
// pieces, as the vendor sent it rather than as the SDK's encoder would:
// encoding a result holds a body several times over (the text, a
// JSON-escaped copy, structuredContent again, the encoder's growing
// buffers, the handler's copy of the answer); a large body is held once
// and written to the connection in pieces.
const SpliceMin = 64 << 10

// A Splice is the part of a tool's answer that bypasses the SDK's encoder:
// the receipt and the vendor body. The SDK encodes every Marshaler's
// output again at every level it is nested in (the receipt in _meta, the
// result, the JSON-RPC response: each compacts and re-escapes all below
// it), so the result it encodes holds placeholders, JSON strings of
// "<tok>-receipt", "<tok>-text" and "<tok>-structured", and [Splice.Write]
// writes each part once in the place of its placeholder.
//
// Below SpliceMin, each part is written as the SDK would have written it,
// byte for byte: the receipt's MarshalJSON is json.Marshal output, compact
// and HTML-escaped, which every further compaction leaves as it is; the
// text is appendSDKText, encoding/json's encoding of the text; the
// structured content is json.Marshal of the body as a json.RawMessage, the
// very call the SDK makes. A large body's text is escapeJSONString and its
// structured content the body as sent (trimmed).
type Splice struct {
	tok     string // "dev.obol/splice-" and 32 hex digits from crypto/rand
	receipt []byte // the receipt's JSON; nil when not spliced
	// body is the vendor body whose text is the text content; nil when
	// the text is not spliced.
	body []byte
	// structured is structuredContent's JSON; nil when not spliced.
	structured []byte
	large      bool // body is SpliceMin bytes or more
	// plain says the gateway made the result itself, of the shape
	// appendPlainResult writes (not an in-process handler's): SetPlain.
	plain bool
	// The placeholders, cut from one string: the receipt's and the
	// text's, and the structured content's as a JSON string.
	phReceipt, phText, phStructured string
}

// NewSplice makes a splice with a fresh token. The token is unguessable
// (128 bits from crypto/rand), so no vendor body or handler result can
// hold a placeholder.
func NewSplice() *Splice {
	const prefix = "dev.obol/splice-"
	var b [16]byte
	rand.Read(b[:])
	var h [32]byte
	hex.Encode(h[:], b[:])
	tok := prefix + string(h[:])
	all := tok + partReceipt + tok + partText + `"` + tok + partStructured + `"`
	n := len(tok)
	sp := &Splice{tok: all[:n], phReceipt: all[:n+len(partReceipt)]}
	all = all[n+len(partReceipt):]
	sp.phText, all = all[:n+len(partText)], all[n+len(partText):]
	sp.phStructured = all
	return sp
}

// The parts of a splice, by the suffix of their placeholder.
const (
	partReceipt    = "-receipt"
	partText       = "-text"
	partStructured = "-structured"
)

// SetReceipt puts the receipt's JSON (its MarshalJSON) in the splice and
// returns the placeholder for _meta.
func (sp *Splice) SetReceipt(b []byte) string {
	sp.receipt = b
	return sp.phReceipt
}

// SetBody puts a non-empty vendor body in the splice, whose text is the
// result's text content, and returns the placeholder for that text and,
// when the body (trimmed) is a JSON object, the placeholder for
// structuredContent (else nil). A body below SpliceMin is written as the
// SDK would write it; a larger one as the vendor sent it.
func (sp *Splice) SetBody(body []byte) (text string, structured json.RawMessage) {
	text = sp.SetText(body)
	if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '{' {
		structured, _ = sp.SetStructured(t)
	}
	return text, structured
}

// SetText puts a non-empty text in the splice, the result's text content,
// and returns its placeholder: below SpliceMin it is written as the SDK
// would write it, a larger one in pieces.
func (sp *Splice) SetText(text []byte) string {
	sp.body, sp.large = text, len(text) >= SpliceMin
	return sp.phText
}

// SetStructured puts v, a JSON value, in the splice as the result's
// structuredContent and returns its placeholder; ok is false, and nothing
// is set, when v is not valid JSON. v is written as the SDK writes a
// json.RawMessage (compacted, <, > and & escaped) unless the text is large
// (SetText before SetStructured): then as it is, trimmed.
func (sp *Splice) SetStructured(v []byte) (placeholder json.RawMessage, ok bool) {
	v = bytes.TrimSpace(v)
	if sp.large {
		if !json.Valid(v) {
			return nil, false
		}
		sp.structured = v
	} else {
		// What the SDK makes of json.RawMessage(v), and an error exactly
		// when v is not valid JSON.
		b, err := json.Marshal(json.RawMessage(v))
		if err != nil {
			return nil, false
		}
		sp.structured = b
	}
	return json.RawMessage(sp.phStructured), true
}

// SetPlain records that the result is the gateway's own, of the shape
// appendPlainResult writes.
func (sp *Splice) SetPlain() { sp.plain = true }

// Plain reports whether SetPlain was called.
func (sp *Splice) Plain() bool { return sp.plain }

// A piece is where a part's placeholder is in the SDK's answer.
type piece struct {
	at, n int
	part  string
}

// Results of locate.
const (
	spliceAbsent = iota // no token in the answer: not the tool's result
	spliceFound         // each part's placeholder exactly once, no other token
	spliceBroken        // anything else: the answer must not leave
)

// Write writes answer, the SDK's answer (status and body) to a request
// whose result holds sp's placeholders, with each placeholder replaced by
// its part, under an exact Content-Length, when every part's placeholder
// is in it exactly once and ok, which says the answer may leave as it is
// (a success, one JSON object, no error member). It reports whether it
// wrote: false with broken when a placeholder is where it does not
// belong, missing, repeated or in an answer that is not ok (the answer
// must then never leave with one in it); false without when the answer
// holds no placeholder (the SDK made it without the result).
func (sp *Splice) Write(w http.ResponseWriter, status int, answer []byte, ok bool) (written, broken bool) {
	ps, found := sp.locate(answer)
	switch {
	case found == spliceFound && ok:
		sp.write(w, status, answer, ps)
		return true, false
	case found != spliceAbsent:
		return false, true
	}
	return false, false
}

// locate finds the placeholders in small, the SDK's answer, in order.
func (sp *Splice) locate(small []byte) (ps []piece, found int) {
	seen := 0
	for at := 0; ; {
		i := bytes.Index(small[at:], unsafeBytes(sp.tok))
		if i < 0 {
			break
		}
		i += at
		if i == 0 || small[i-1] != '"' {
			return nil, spliceBroken
		}
		rest := small[i+len(sp.tok):]
		var part string
		var bit int
		switch {
		case hasPart(rest, partReceipt) && sp.receipt != nil:
			part, bit = partReceipt, 1
		case hasPart(rest, partText) && sp.body != nil:
			part, bit = partText, 2
		case hasPart(rest, partStructured) && sp.structured != nil:
			part, bit = partStructured, 4
		default:
			return nil, spliceBroken
		}
		if seen&bit != 0 {
			return nil, spliceBroken
		}
		seen |= bit
		n := 1 + len(sp.tok) + len(part) + 1
		if ps == nil {
			ps = make([]piece, 0, 3)
		}
		ps = append(ps, piece{at: i - 1, n: n, part: part})
		at = i - 1 + n
	}
	if seen == 0 {
		return nil, spliceAbsent
	}
	want := 0
	if sp.receipt != nil {
		want |= 1
	}
	if sp.body != nil {
		want |= 2
	}
	if sp.structured != nil {
		want |= 4
	}
	if seen != want {
		return nil, spliceBroken
	}
	return ps, spliceFound
}

// hasPart reports whether rest starts with part and the closing quote.
func hasPart(rest []byte, part string) bool {
	return len(rest) > len(part) && string(rest[:len(part)]) == part && rest[len(part)] == '"'
}

// unsafeBytes is s as bytes, not copied: only read.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// write writes small, the SDK's answer, with the pieces ps (from locate)
// replaced by their parts, under an exact Content-Length.
func (sp *Splice) write(w http.ResponseWriter, status int, small []byte, ps []piece) {
	if !sp.large {
		// One buffer, one write: the answer is small.
		out := make([]byte, 0, len(small)+len(sp.receipt)+len(sp.structured)+len(sp.body)+len(sp.body)/8+8)
		at := 0
		for _, p := range ps {
			out = append(out, small[at:p.at]...)
			switch p.part {
			case partReceipt:
				out = append(out, sp.receipt...)
			case partStructured:
				out = append(out, sp.structured...)
			default:
				out = appendSDKText(out, sp.body)
			}
			at = p.at + p.n
		}
		out = append(out, small[at:]...)
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
		w.WriteHeader(status)
		w.Write(out)
		return
	}
	total := len(small)
	for _, p := range ps {
		total -= p.n
		switch p.part {
		case partReceipt:
			total += len(sp.receipt)
		case partStructured:
			total += len(sp.structured)
		default:
			escapeJSONString(sp.body, func(b []byte) { total += len(b) })
		}
	}
	w.Header().Set("Content-Length", strconv.Itoa(total))
	w.WriteHeader(status)
	at := 0
	for _, p := range ps {
		w.Write(small[at:p.at])
		switch p.part {
		case partReceipt:
			w.Write(sp.receipt)
		case partStructured:
			w.Write(sp.structured)
		default:
			escapeJSONString(sp.body, func(b []byte) { w.Write(b) })
		}
		at = p.at + p.n
	}
	w.Write(small[at:])
}

// appendSDKText appends body as a JSON string of its text, exactly as
// json.Marshal writes strings.ToValidUTF8(string(body), "\uFFFD"), which is
// what the SDK's encoder wrote for a result whose text that is: each run
// of bytes that is not UTF-8 is one U+FFFD; ", \\, control characters, <,
// >, &, U+2028 and U+2029 are escaped as encoding/json escapes them.
func appendSDKText(dst, body []byte) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	invalid := false
	for i := 0; i < len(body); {
		c := body[i]
		if c < utf8.RuneSelf {
			invalid = false
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, body[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRune(body[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, body[start:i]...)
			if !invalid {
				dst = append(dst, "\ufffd"...)
			}
			invalid = true
			i++
			start = i
			continue
		}
		invalid = false
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, body[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += n
			start = i
			continue
		}
		i += n
	}
	dst = append(dst, body[start:]...)
	return append(dst, '"')
}

// escapeJSONString hands out, in pieces of at most 32 KiB, body as a
// quoted JSON string of its text: a run of bytes that is not UTF-8 is one
// U+FFFD (strings.ToValidUTF8, as a smaller body's text is), control
// characters, U+2028 and U+2029 are escaped. out may not keep a piece.
func escapeJSONString(body []byte, out func([]byte)) {
	const hexDigits = "0123456789abcdef"
	buf := make([]byte, 0, 32<<10)
	flush := func() {
		out(buf)
		buf = buf[:0]
	}
	buf = append(buf, '"')
	invalid := false
	for i := 0; i < len(body); {
		if len(buf) > cap(buf)-8 {
			flush()
		}
		c := body[i]
		if c < utf8.RuneSelf {
			invalid = false
			i++
			switch {
			case c == '"' || c == '\\':
				buf = append(buf, '\\', c)
			case c == '\n':
				buf = append(buf, '\\', 'n')
			case c == '\r':
				buf = append(buf, '\\', 'r')
			case c == '\t':
				buf = append(buf, '\\', 't')
			case c < 0x20:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				buf = append(buf, c)
			}
			continue
		}
		r, n := utf8.DecodeRune(body[i:])
		if r == utf8.RuneError && n == 1 {
			if !invalid {
				buf = append(buf, "\ufffd"...)
			}
			invalid = true
			i++
			continue
		}
		invalid = false
		if r == '\u2028' || r == '\u2029' {
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		} else {
			buf = append(buf, body[i:i+n]...)
		}
		i += n
	}
	buf = append(buf, '"')
	flush()
}
