package canonical

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// firstSpecial returns the index in w (little-endian) of the first byte that
// does not stand for itself in a string, 8 if there is none, and whether it
// is '"'. That is read from the masks rather than by loading the byte at the
// index found, which would wait for the index.
func firstSpecial(w uint64) (int, bool) {
	s := specialBytes(w)
	return bits.TrailingZeros64(s) / 8, s&-s&quoteBytes(w) != 0
}

// quoteBytes marks, with its high bit, each '"' in w, exactly up to and
// including the lowest one (as specialBytes, borrows mark only above).
func quoteBytes(w uint64) uint64 {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q := w ^ (lo * '"')
	return (q - lo) &^ q & hi
}

// specialBytes marks, with its high bit, the lowest byte of w (little-endian)
// that does not stand for itself in a string: below 0x20, '"', '\\', or
// non-ASCII. Bytes above it may be marked too: borrows mark only above a
// marked byte, and a byte at or above 0x80, which each difference can mark,
// is marked by w itself.
func specialBytes(w uint64) uint64 {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q, bs := w^(lo*'"'), w^(lo*'\\')
	return ((w - lo*0x20) | (q - lo) | (bs - lo) | w) & hi
}

// strSafe marks the bytes that stand for themselves inside a string.
var strSafe = func() (t [256]bool) {
	for i := 0x20; i < 0x80; i++ {
		t[i] = i != '"' && i != '\\'
	}
	return t
}()

// Flags of a parsed string.
const (
	strEscaped  = 1 << iota // the canonical form has an escape
	strHigh                 // a rune at or above U+E000 (a UTF-8 lead byte >= 0xEE)
	strVerbatim             // the canonical form is the input as written
)

// str parses the string at c.pos (a '"') and appends its canonical form.
func (c *canonicalizer) str() (flags int, err error) {
	in := c.in
	start := c.pos
	run := start // next byte to copy verbatim
	i := start + 1
	for {
		// The first 8 bytes in line: runs between escapes are short.
		if i+8 <= len(in) {
			if m := specialBytes(binary.LittleEndian.Uint64(in[i:])); m != 0 {
				i += bits.TrailingZeros64(m) / 8
			} else {
				i = skipSafe(in, i+8)
			}
		} else {
			i = skipSafe(in, i)
		}
		if i >= len(in) {
			return 0, c.errorf(start, "unterminated string")
		}
		switch ch := in[i]; {
		case ch == '"':
			if run == start {
				flags |= strVerbatim
			}
			if t, n := len(c.tape), i+1-run; n <= 16 && cap(c.tape)-t >= 16 && len(in)-run >= 16 {
				// Short: one fixed-size copy, which need not call memmove.
				*(*[16]byte)(c.tape[t : t+16]) = *(*[16]byte)(in[run:])
				c.tape = c.tape[:t+n]
			} else {
				c.tape = append(c.tape, in[run:i+1]...)
			}
			c.pos = i + 1
			return flags, nil
		case ch >= 0x80:
			// Validate the text up to the next quote, escape or control
			// character at once rather than rune by rune.
			j := skipText(in, i)
			valid, high := validText(in[i:j])
			if !valid {
				return 0, c.errorf(firstInvalidUTF8(in[:j], i), "invalid UTF-8 in string")
			}
			if high {
				flags |= strHigh
			}
			i = j
		case ch < 0x20:
			return 0, c.errorf(i, "unescaped control character in string")
		default: // backslash
			if t, n := len(c.tape), i-run; n <= 16 && cap(c.tape)-t >= 16 && len(in)-run >= 16 {
				*(*[16]byte)(c.tape[t : t+16]) = *(*[16]byte)(in[run:])
				c.tape = c.tape[:t+n]
			} else {
				c.tape = append(c.tape, in[run:i]...)
			}
			if i+1 >= len(in) {
				return 0, c.errorf(start, "unterminated string")
			}
			switch e := in[i+1]; e {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				c.tape = append(c.tape, '\\', e)
				flags |= strEscaped
				i += 2
			case '/':
				c.tape = append(c.tape, '/')
				i += 2
			case 'u':
				r, ok := parseHex4(in, i+2)
				if !ok {
					return 0, c.errorf(i, "invalid \\u escape")
				}
				i += 6
				switch {
				case r >= 0xdc00 && r <= 0xdfff:
					return 0, c.errorf(i-6, "lone low surrogate escape")
				case r >= 0xd800 && r <= 0xdbff:
					lo, ok := rune(0), false
					if i+1 < len(in) && in[i] == '\\' && in[i+1] == 'u' {
						lo, ok = parseHex4(in, i+2)
					}
					if !ok || lo < 0xdc00 || lo > 0xdfff {
						return 0, c.errorf(i-6, "lone high surrogate escape")
					}
					i += 6
					r = 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00)
					c.tape = utf8.AppendRune(c.tape, r)
					flags |= strHigh
				case r < 0x20 || r == '"' || r == '\\':
					c.tape = appendEscaped(c.tape, byte(r))
					flags |= strEscaped
				case r < 0x800:
					// Below U+0800 (Latin accents, °): two bytes in line,
					// where AppendRune calls out for every non-ASCII rune.
					if r < 0x80 {
						c.tape = append(c.tape, byte(r))
					} else {
						c.tape = append(c.tape, 0xc0|byte(r>>6), 0x80|byte(r)&0x3f)
					}
				default:
					if r >= 0xe000 {
						flags |= strHigh
					}
					c.tape = utf8.AppendRune(c.tape, r)
				}
			default:
				return 0, c.errorf(i, "invalid escape in string")
			}
			run = i
		}
	}
}

// skipSafe returns the index of the first byte at or after i that does not
// stand for itself in a string, or len(in). It tests eight bytes at a time.
func skipSafe(in []byte, i int) int {
	for ; i+8 <= len(in); i += 8 {
		if m := specialBytes(binary.LittleEndian.Uint64(in[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(in) && strSafe[in[i]] {
		i++
	}
	return i
}

// skipText is skipSafe that passes bytes at or above 0x80 as well.
func skipText(in []byte, i int) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(in); i += 8 {
		w := binary.LittleEndian.Uint64(in[i:])
		q, bs := w^(lo*'"'), w^(lo*'\\')
		// As in skipSafe, without marking the bytes that have the high bit.
		m := ((w-lo*0x20)&^w | (q-lo)&^q | (bs-lo)&^bs) & hi
		if m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(in) && (in[i] >= 0x80 || strSafe[in[i]]) {
		i++
	}
	return i
}

// validText reports whether b is valid UTF-8 (as utf8.Valid) and whether it
// has a rune at or above U+E000 (as hasHighRune), in one pass: the non-ASCII
// runs of strings are mostly short, where the call and the second scan cost
// more than the check.
func validText(b []byte) (valid, high bool) {
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c < 0x80:
			i++
		case c < 0xc2: // a continuation byte, or an overlong 2-byte lead
			return false, false
		case c < 0xe0:
			if i+1 >= len(b) || b[i+1]&0xc0 != 0x80 {
				return false, false
			}
			i += 2
		case c < 0xf0:
			// E0 must not be overlong, ED must not encode a surrogate.
			lo, hi := byte(0x80), byte(0xbf)
			if c == 0xe0 {
				lo = 0xa0
			} else if c == 0xed {
				hi = 0x9f
			}
			if i+2 >= len(b) || b[i+1] < lo || b[i+1] > hi || b[i+2]&0xc0 != 0x80 {
				return false, false
			}
			high = high || c >= 0xee
			i += 3
		case c < 0xf5:
			// F0 must not be overlong, F4 must not pass U+10FFFF.
			lo, hi := byte(0x80), byte(0xbf)
			if c == 0xf0 {
				lo = 0x90
			} else if c == 0xf4 {
				hi = 0x8f
			}
			if i+3 >= len(b) || b[i+1] < lo || b[i+1] > hi || b[i+2]&0xc0 != 0x80 || b[i+3]&0xc0 != 0x80 {
				return false, false
			}
			high = true
			i += 4
		default:
			return false, false
		}
	}
	return true, high
}

// firstInvalidUTF8 returns the offset at or after i of the first byte of in
// that does not start a valid UTF-8 sequence.
func firstInvalidUTF8(in []byte, i int) int {
	for i < len(in) {
		r, size := utf8.DecodeRune(in[i:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		i += size
	}
	return i
}

func parseHex4(in []byte, i int) (rune, bool) {
	if len(in)-i < 4 {
		return 0, false
	}
	var r rune
	for _, ch := range in[i : i+4] {
		switch {
		case ch >= '0' && ch <= '9':
			ch -= '0'
		case ch >= 'a' && ch <= 'f':
			ch -= 'a' - 10
		case ch >= 'A' && ch <= 'F':
			ch -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(ch)
	}
	return r, true
}

// appendEscaped appends the JCS escape of a control character, '"' or '\'.
func appendEscaped(dst []byte, b byte) []byte {
	switch b {
	case '"', '\\':
		return append(dst, '\\', b)
	case '\b':
		return append(dst, '\\', 'b')
	case '\t':
		return append(dst, '\\', 't')
	case '\n':
		return append(dst, '\\', 'n')
	case '\f':
		return append(dst, '\\', 'f')
	case '\r':
		return append(dst, '\\', 'r')
	}
	const hexDigits = "0123456789abcdef"
	return append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
}

// unescapeCanonical appends the text of a canonical string body, which holds
// only the escapes that appendEscaped writes.
func unescapeCanonical(dst, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			dst = append(dst, s[i])
			continue
		}
		i++
		switch s[i] {
		case 'b':
			dst = append(dst, '\b')
		case 't':
			dst = append(dst, '\t')
		case 'n':
			dst = append(dst, '\n')
		case 'f':
			dst = append(dst, '\f')
		case 'r':
			dst = append(dst, '\r')
		case 'u':
			r, _ := parseHex4(s, i+1)
			dst = append(dst, byte(r))
			i += 4
		default: // '"' or '\\'
			dst = append(dst, s[i])
		}
	}
	return dst
}
