package mcpgateway

import (
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// spliceMin is the size from which a vendor body bypasses the SDK's
// encoder. Encoding a result holds it several times over (the text, a
// JSON-escaped copy, structuredContent again, the encoder's growing
// buffers, the handler's copy of the answer); a spliced body is held once,
// as the vendor sent it, and written to the connection in pieces.
const spliceMin = 64 << 10

// largeBody is a vendor body that the answer carries by splice: the result
// the SDK encodes holds placeholders (JSON strings of a random token) where
// finish writes the body, escaped as the text and as is as
// structuredContent.
type largeBody struct {
	body       []byte
	text       string // the placeholder of the text content
	structured string // the placeholder of structuredContent; "" when none
}

// spliceBody makes the placeholders of body: the text, and with
// structured the structuredContent (body is then one JSON object).
func spliceBody(body []byte, structured bool) *largeBody {
	var tok [12]byte
	for i := range tok {
		tok[i] = byte(rand.Uint32())
	}
	t := "dev.obol/splice-" + hex.EncodeToString(tok[:])
	lb := &largeBody{body: body, text: t + "-text"}
	if structured {
		lb.structured = t + "-structured"
	}
	return lb
}

// write writes the SDK's answer small with the placeholders of lb
// replaced, and reports whether it could: false (nothing written) when a
// placeholder is not in small exactly once.
func (lb *largeBody) write(w http.ResponseWriter, status int, small []byte) bool {
	type piece struct {
		at, n int
		raw   bool // the body as is, else escaped as a JSON string
	}
	var ps []piece
	for _, p := range []struct {
		tok string
		raw bool
	}{{lb.text, false}, {lb.structured, true}} {
		if p.tok == "" {
			continue
		}
		q := `"` + p.tok + `"`
		i := bytes.Index(small, []byte(q))
		if i < 0 || bytes.Contains(small[i+len(q):], []byte(q)) {
			return false
		}
		ps = append(ps, piece{at: i, n: len(q), raw: p.raw})
	}
	if len(ps) == 2 && ps[1].at < ps[0].at {
		ps[0], ps[1] = ps[1], ps[0]
	}
	raw := bytes.TrimSpace(lb.body)
	total := len(small)
	textLen := 0
	for _, p := range ps {
		total -= p.n
		if p.raw {
			total += len(raw)
		} else {
			escapeJSONString(lb.body, func(b []byte) { textLen += len(b) })
			total += textLen
		}
	}
	w.Header().Set("Content-Length", strconv.Itoa(total))
	w.WriteHeader(status)
	at := 0
	for _, p := range ps {
		w.Write(small[at:p.at])
		if p.raw {
			w.Write(raw)
		} else {
			escapeJSONString(lb.body, func(b []byte) { w.Write(b) })
		}
		at = p.at + p.n
	}
	w.Write(small[at:])
	return true
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

// large is the spliced body of the answer, nil when none.
func (sw *sanitizer) large() *largeBody {
	if sw.ci == nil {
		return nil
	}
	return sw.ci.large
}
