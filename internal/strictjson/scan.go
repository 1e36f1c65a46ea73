package strictjson

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// scanner is the one pass behind Check and Object: a recursive descent over
// the bytes that allocates only for a member name with escapes (it must be
// compared unescaped) and for an object with many members (a map). The
// encoding/json tokenizer it replaces made an interface value per token.
type scanner struct {
	data []byte
	i    int
	// track: check member names for repeats and numbers for range
	// (Check); Object checks only the syntax of the values.
	track bool
}

// failure is a problem found by the scanner; path collects the segments
// from the innermost out ("[3]", a name, or "{member N}") as it unwinds.
type failure struct {
	err  error
	off  int
	path []string
}

// manyMembers is where an object's repeat check moves from comparing with
// every earlier name to a map.
const manyMembers = 16

// Check reports whether data is exactly one JSON value (surrounding
// whitespace allowed) in valid UTF-8, without lone surrogate escapes, and
// without a member name that occurs twice in one object. Names that differ
// only in case are distinct: Check is for documents whose objects may be
// user data.
func Check(data []byte) error {
	s := scanner{data: data, track: true}
	f := s.document()
	if f == nil {
		return nil
	}
	// Invalid UTF-8 or a lone surrogate anywhere outranks what the scan
	// met first: the document as a whole is not JSON text.
	if !utf8.Valid(data) {
		return &Error{Err: ErrSyntax}
	}
	if off, ok := surrogatesOK(data); !ok {
		return &Error{Offset: off, Err: ErrSyntax}
	}
	return f.error()
}

func (f *failure) error() *Error {
	if f.err == ErrSyntax {
		return &Error{Offset: int64(f.off), Err: ErrSyntax}
	}
	var b strings.Builder
	for i := len(f.path) - 1; i >= 0; i-- {
		seg := f.path[i]
		if seg[0] != '[' && b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return &Error{Path: b.String(), Err: f.err}
}

func (s *scanner) syntax() *failure {
	return &failure{err: ErrSyntax, off: s.i}
}

// document reads one value and the whitespace around it.
func (s *scanner) document() *failure {
	s.space()
	if f := s.value(0); f != nil {
		return f
	}
	s.space()
	if s.i != len(s.data) {
		return s.syntax()
	}
	return nil
}

func (s *scanner) space() {
	for s.i < len(s.data) {
		if c := s.data[s.i]; c > ' ' || c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return
		}
		s.i++
	}
}

// value reads the value at s.i (whitespace already skipped), nested depth
// levels deep.
func (s *scanner) value(depth int) *failure {
	if s.i >= len(s.data) {
		return s.syntax()
	}
	switch c := s.data[s.i]; c {
	case '"':
		if _, ok := s.str(); !ok {
			return s.syntax()
		}
		return nil
	case '{', '[':
		if depth >= MaxDepth {
			return &failure{err: ErrDepth}
		}
		if c == '{' {
			return s.object(depth)
		}
		return s.array(depth)
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		return s.number()
	}
}

func (s *scanner) literal(lit string) *failure {
	if len(s.data)-s.i < len(lit) || string(s.data[s.i:s.i+len(lit)]) != lit {
		return s.syntax()
	}
	s.i += len(lit)
	return nil
}

// number reads a number in JSON's grammar and refuses one whose float64
// value is infinite (encoding/json cannot read it into any value).
func (s *scanner) number() *failure {
	d := s.data
	start, i := s.i, s.i
	if i < len(d) && d[i] == '-' {
		i++
	}
	intStart := i
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i++; i < len(d) && d[i] >= '0' && d[i] <= '9'; i++ {
		}
	default:
		s.i = i
		return s.syntax()
	}
	intDigits := i - intStart
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			s.i = i
			return s.syntax()
		}
		for i++; i < len(d) && d[i] >= '0' && d[i] <= '9'; i++ {
		}
	}
	exp := false
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		exp = true
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			s.i = i
			return s.syntax()
		}
		for i++; i < len(d) && d[i] >= '0' && d[i] <= '9'; i++ {
		}
	}
	s.i = i
	// Without an exponent, at most 308 integer digits stay below 1e308:
	// finite, however many fraction digits follow.
	if s.track && (exp || intDigits > 308) {
		if f, err := strconv.ParseFloat(string(d[start:i]), 64); err != nil && math.IsInf(f, 0) {
			return &failure{err: ErrNumber}
		}
	}
	return nil
}

func (s *scanner) array(depth int) *failure {
	s.i++ // [
	s.space()
	if s.i < len(s.data) && s.data[s.i] == ']' {
		s.i++
		return nil
	}
	for n := 0; ; n++ {
		if f := s.value(depth + 1); f != nil {
			f.path = append(f.path, "["+strconv.Itoa(n)+"]")
			return f
		}
		s.space()
		if s.i >= len(s.data) {
			return s.syntax()
		}
		switch s.data[s.i] {
		case ',':
			s.i++
			s.space()
		case ']':
			s.i++
			return nil
		default:
			return s.syntax()
		}
	}
}

func (s *scanner) object(depth int) *failure {
	s.i++ // {
	s.space()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		return nil
	}
	// The names so far, for the repeat check: on the stack while few, in
	// a map past that.
	var seen [manyMembers][]byte
	var many map[string]struct{}
	for n := 0; ; n++ {
		if s.i >= len(s.data) || s.data[s.i] != '"' {
			return s.syntax()
		}
		var name []byte
		if s.track {
			var ok bool
			if name, ok = s.name(); !ok {
				return s.syntax()
			}
			if many == nil && n < manyMembers {
				for _, prev := range seen[:n] {
					if bytes.Equal(prev, name) {
						return repeated(name, n)
					}
				}
				seen[n] = name
			} else {
				if many == nil {
					many = make(map[string]struct{}, 2*manyMembers)
					for _, prev := range seen {
						many[string(prev)] = struct{}{}
					}
				}
				if _, dup := many[string(name)]; dup {
					return repeated(name, n)
				}
				many[string(name)] = struct{}{}
			}
		} else if _, ok := s.str(); !ok {
			return s.syntax()
		}
		s.space()
		if s.i >= len(s.data) || s.data[s.i] != ':' {
			return s.syntax()
		}
		s.i++
		s.space()
		if f := s.value(depth + 1); f != nil {
			f.path = append(f.path, segment(name, n))
			return f
		}
		s.space()
		if s.i >= len(s.data) {
			return s.syntax()
		}
		switch s.data[s.i] {
		case ',':
			s.i++
			s.space()
		case '}':
			s.i++
			return nil
		default:
			return s.syntax()
		}
	}
}

func repeated(name []byte, n int) *failure {
	return &failure{err: ErrRepeated, path: []string{segment(name, n)}}
}

// segment is a member's part of an error path: its name when plain, else
// its position, so a hostile or secret name never appears.
func segment(name []byte, n int) string {
	if plainName(string(name)) {
		return string(name)
	}
	return "{member " + strconv.Itoa(n) + "}"
}

// name reads the string at s.i and returns its value: the bytes between
// the quotes, or a fresh unescaped copy when it has escapes.
func (s *scanner) name() ([]byte, bool) {
	start := s.i + 1
	escaped, ok := s.str()
	if !ok {
		return nil, false
	}
	raw := s.data[start : s.i-1 : s.i-1]
	if !escaped {
		return raw, true
	}
	return unescape(raw), true
}

// str reads the string at s.i (its opening quote) and reports whether it
// has escapes. It refuses control characters, invalid UTF-8, malformed
// escapes and a surrogate escape that is not half of a pair.
func (s *scanner) str() (escaped, ok bool) {
	d := s.data
	i := s.i + 1
	for {
		// Most of a document is string bytes that stand for themselves:
		// eight at a time, then one at a time up to the next other byte.
		for i+8 <= len(d) && !special8(binary.LittleEndian.Uint64(d[i:])) {
			i += 8
		}
		for i < len(d) && plain[d[i]] {
			i++
		}
		if i >= len(d) {
			s.i = i
			return false, false
		}
		switch c := d[i]; {
		case c == '"':
			s.i = i + 1
			return escaped, true
		case c == '\\':
			escaped = true
			n := escapeLen(d, i)
			if n == 0 {
				s.i = i
				return false, false
			}
			i += n
		case c < ' ':
			s.i = i
			return false, false
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				s.i = i
				return false, false
			}
			i += size
		}
	}
}

// special8 reports whether one of the eight bytes of w is a quote, a
// backslash, a control character or not ASCII. (A byte below 0x20 or equal
// to one of the two makes its lane of the subtraction borrow, setting the
// lane's top bit where the byte's own was clear.)
func special8(w uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q := w ^ (lo * '"')
	b := w ^ (lo * '\\')
	return ((w-lo*' ')&^w|(q-lo)&^q|(b-lo)&^b|w)&hi != 0
}

// plain marks the bytes that stand for themselves in a string (ASCII
// only: the rest is decoded as UTF-8).
var plain = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// escapeLen returns the length of the escape at d[i] (a backslash), a
// surrogate pair counted whole, or 0 if it is malformed or a lone
// surrogate.
func escapeLen(d []byte, i int) int {
	if i+1 >= len(d) {
		return 0
	}
	switch d[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
	default:
		return 0
	}
	r, ok := hexRune(d, i+2)
	switch {
	case !ok:
		return 0
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0
	case r >= 0xD800 && r <= 0xDBFF:
		if i+7 >= len(d) || d[i+6] != '\\' || d[i+7] != 'u' {
			return 0
		}
		if lo, ok := hexRune(d, i+8); !ok || lo < 0xDC00 || lo > 0xDFFF {
			return 0
		}
		return 12
	}
	return 6
}

func hexRune(d []byte, at int) (rune, bool) {
	if at+4 > len(d) {
		return 0, false
	}
	var r rune
	for _, c := range d[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// unescape decodes the contents of a string that str accepted.
func unescape(raw []byte) []byte {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		switch raw[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, _ := hexRune(raw, i+2)
			if r >= 0xD800 && r <= 0xDBFF {
				lo, _ := hexRune(raw, i+8)
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				i += 6
			}
			out = utf8.AppendRune(out, r)
			i += 6
			continue
		default: // " \ /
			out = append(out, raw[i+1])
		}
		i += 2
	}
	return out
}
