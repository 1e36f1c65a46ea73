package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// maxDepth is the deepest nesting of arrays and objects that Canonicalize and
// RequestHash accept; deeper input is ErrInvalidJSON rather than unbounded
// work. It equals the limit of encoding/json, so any arguments a Go MCP server
// can decode can be hashed.
const maxDepth = 10000

// emptyObjectHash is RequestHash of absent arguments: the hash of "{}".
const emptyObjectHash = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"

// Canonicalize returns the RFC 8785 (JCS) canonical form of one JSON value:
// no insignificant whitespace, object members sorted by the UTF-16 code units
// of their names, numbers as ECMAScript's Number.prototype.toString prints the
// nearest IEEE 754 double, strings as UTF-8 with only the escapes JCS requires.
//
// Input that is not exactly one JSON value (RFC 8259), invalid UTF-8, a lone
// surrogate escape, two members of one object with the same name (compared
// after unescaping), a number beyond the double range, or nesting of arrays
// and objects deeper than 10000 is an error wrapping ErrInvalidJSON that names the input offset but
// never quotes the input. Numbers that underflow become 0, as in ECMAScript.
func Canonicalize(data []byte) ([]byte, error) {
	return AppendCanonical(nil, data)
}

// AppendCanonical appends the canonical form of data (see Canonicalize) to dst
// and returns the extended slice. On error it returns dst unchanged.
func AppendCanonical(dst, data []byte) ([]byte, error) {
	c := getCanonicalizer()
	defer putCanonicalizer(c)
	if err := c.parse(data); err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, len(c.tape)) // reordering keeps the length
	if !c.reorder {
		return append(dst, c.tape...), nil
	}
	c.out, c.h = dst, nil
	c.emitRange(0, len(c.tape), 0)
	dst, c.out = c.out, nil
	return dst, nil
}

// RequestHash returns "sha256:" followed by the lowercase hex SHA-256 of the
// canonical form of a tool call's arguments (see Canonicalize).
//
// Absent arguments hash as "{}": nil or empty input, input of only JSON
// whitespace, and the JSON literal null (what many encoders write for an
// absent map), so a client that omits arguments and one that sends {} or null
// never see a request mismatch. Any other value is hashed as it is; checking
// that arguments are an object is left to the caller.
func RequestHash(arguments []byte) (string, error) {
	if isBlank(arguments) {
		return emptyObjectHash, nil
	}
	c := getCanonicalizer()
	defer putCanonicalizer(c)
	if err := c.parse(arguments); err != nil {
		return "", err
	}
	if string(c.tape) == "null" {
		return emptyObjectHash, nil
	}
	if c.hash == nil {
		c.hash = sha256.New()
	}
	c.hash.Reset()
	if !c.reorder {
		c.hash.Write(c.tape)
	} else {
		c.out, c.h = c.buf[:0], c.hash
		c.emitRange(0, len(c.tape), 0)
		c.hash.Write(c.out)
		c.buf, c.out, c.h = c.out[:0], nil, nil
	}
	var s [len("sha256:") + 2*sha256.Size]byte
	copy(s[:], "sha256:")
	hex.Encode(s[len("sha256:"):], c.hash.Sum(c.sum[:0]))
	return string(s[:]), nil
}

func isBlank(b []byte) bool {
	for _, ch := range b {
		if ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r' {
			return false
		}
	}
	return true
}

// The canonicalizer works in two passes. The parse pass validates the input
// and writes every token in canonical form, in input order, to the tape; it
// sorts the members of each object as the object closes. When every object
// was already in order (the common case), the tape is the output. Otherwise
// the emit pass copies the tape, visiting the members of the objects that need
// it in sorted order and copying everything else in runs, so each byte is
// copied once whatever the nesting.
type canonicalizer struct {
	in      []byte
	pos     int
	depth   int
	reorder bool // some object's members are not in input order

	tape    []byte   // canonical tokens in input order
	keys    []byte   // unescaped member names whose canonical form has escapes
	pending []member // members of the objects still open (a stack)
	members []member // sorted members of closed objects that need reordering
	objs    []object // every object, in order of its '{'
	open    []int    // indexes into objs of the objects still open

	out  []byte    // emit target
	h    hash.Hash // when set, emit flushes out into it
	buf  []byte    // pooled emit buffer for hashing
	hash hash.Hash
	sum  [sha256.Size]byte
}

// member is one `"name":value` of an object, located in the tape.
type member struct {
	start, end       int // the member in the tape, without a separating comma
	keyStart, keyEnd int // the unescaped name, in keys if inKeys, else in tape
	firstObj         int // index in objs of the first object inside the value
	off              int // input offset of the name, for errors
	inKeys           bool
}

type object struct {
	start, end int  // '{' through '}' in the tape
	mem, nmem  int  // members[mem:mem+nmem], sorted; only when dirty
	next       int  // index in objs of the first object after this one's subtree
	dirty      bool // this object or one inside it needs reordering
}

const (
	flushSize     = 16 << 10 // emit chunk handed to the hash
	maxPooledSize = 4 << 20  // larger buffers are not kept between calls
)

var canonicalizers = sync.Pool{New: func() any { return new(canonicalizer) }}

func getCanonicalizer() *canonicalizer {
	return canonicalizers.Get().(*canonicalizer)
}

func putCanonicalizer(c *canonicalizer) {
	c.in, c.out, c.h = nil, nil, nil
	c.tape = trimPooled(c.tape, 1)
	c.keys = trimPooled(c.keys, 1)
	c.buf = trimPooled(c.buf, 1)
	c.pending = trimPooled(c.pending, 48)
	c.members = trimPooled(c.members, 48)
	c.objs = trimPooled(c.objs, 48)
	c.open = trimPooled(c.open, 8)
	canonicalizers.Put(c)
}

func trimPooled[T any](s []T, size int) []T {
	if cap(s)*size > maxPooledSize {
		return nil
	}
	return s[:0]
}

// parse validates c.in and fills the tape.
func (c *canonicalizer) parse(data []byte) error {
	c.in, c.pos, c.depth, c.reorder = data, 0, 0, false
	c.tape = slices.Grow(c.tape[:0], len(data))
	c.keys, c.pending, c.members, c.objs, c.open = c.keys[:0], c.pending[:0], c.members[:0], c.objs[:0], c.open[:0]
	if c.skipSpace() < 0 {
		return c.errorf(c.pos, "no JSON value")
	}
	if err := c.value(); err != nil {
		return err
	}
	if c.skipSpace() >= 0 {
		return c.errorf(c.pos, "%s after the top-level value", describeByte(c.in[c.pos]))
	}
	return nil
}

func (c *canonicalizer) errorf(off int, format string, args ...any) error {
	return fmt.Errorf("%w: at offset %d: %s", ErrInvalidJSON, off, fmt.Sprintf(format, args...))
}

// describeByte names an unexpected byte without quoting input that might be a
// secret: structural characters are shown, anything else only by its class.
func describeByte(b byte) string {
	switch {
	case b == '{' || b == '}' || b == '[' || b == ']' || b == ':' || b == ',' || b == '"':
		return "unexpected '" + string(rune(b)) + "'"
	case b >= '0' && b <= '9' || b == '-':
		return "unexpected number"
	case b >= 0x80:
		return "unexpected non-ASCII byte"
	case b < 0x20 || b == 0x7f:
		return "unexpected control character"
	}
	return "unexpected character"
}

// skipSpace advances past JSON whitespace and returns the next byte, or -1 at
// the end of the input.
func (c *canonicalizer) skipSpace() int {
	for c.pos < len(c.in) {
		switch ch := c.in[c.pos]; ch {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return int(ch)
		}
	}
	return -1
}

// value parses the value at c.pos, which is not whitespace.
func (c *canonicalizer) value() error {
	switch ch := c.in[c.pos]; ch {
	case '{':
		return c.object()
	case '[':
		return c.array()
	case '"':
		_, err := c.str()
		return err
	case 't':
		return c.literal("true")
	case 'f':
		return c.literal("false")
	case 'n':
		return c.literal("null")
	default:
		if ch == '-' || ch >= '0' && ch <= '9' {
			return c.number()
		}
		return c.errorf(c.pos, "%s where a value was expected", describeByte(ch))
	}
}

func (c *canonicalizer) literal(lit string) error {
	if len(c.in)-c.pos < len(lit) || string(c.in[c.pos:c.pos+len(lit)]) != lit {
		return c.errorf(c.pos, "invalid literal (want %s)", lit)
	}
	c.tape = append(c.tape, lit...)
	c.pos += len(lit)
	return nil
}

func (c *canonicalizer) array() error {
	if c.depth++; c.depth > maxDepth {
		return c.errorf(c.pos, "nesting deeper than %d", maxDepth)
	}
	c.pos++
	c.tape = append(c.tape, '[')
	ch := c.skipSpace()
	if ch == ']' {
		c.pos++
		c.tape = append(c.tape, ']')
		c.depth--
		return nil
	}
	for {
		if ch < 0 {
			return c.errorf(c.pos, "unexpected end of input in array")
		}
		if err := c.value(); err != nil {
			return err
		}
		switch ch = c.skipSpace(); ch {
		case ',':
			c.pos++
			c.tape = append(c.tape, ',')
			ch = c.skipSpace()
		case ']':
			c.pos++
			c.tape = append(c.tape, ']')
			c.depth--
			return nil
		case -1:
			return c.errorf(c.pos, "unexpected end of input in array")
		default:
			return c.errorf(c.pos, "%s after array element (want ',' or ']')", describeByte(byte(ch)))
		}
	}
}

func (c *canonicalizer) object() error {
	if c.depth++; c.depth > maxDepth {
		return c.errorf(c.pos, "nesting deeper than %d", maxDepth)
	}
	idx := len(c.objs)
	c.objs = append(c.objs, object{start: len(c.tape)})
	c.open = append(c.open, idx)
	base := len(c.pending)
	c.pos++
	c.tape = append(c.tape, '{')
	ch := c.skipSpace()
	if ch != '}' {
		for {
			if ch != '"' {
				if ch < 0 {
					return c.errorf(c.pos, "unexpected end of input in object")
				}
				return c.errorf(c.pos, "%s where a member name was expected", describeByte(byte(ch)))
			}
			m := member{start: len(c.tape), off: c.pos}
			escaped, err := c.str()
			if err != nil {
				return err
			}
			m.keyStart, m.keyEnd = m.start+1, len(c.tape)-1
			if escaped {
				m.keyStart, m.keyEnd, m.inKeys = len(c.keys), 0, true
				c.keys = unescapeCanonical(c.keys, c.tape[m.start+1:len(c.tape)-1])
				m.keyEnd = len(c.keys)
			}
			if ch = c.skipSpace(); ch != ':' {
				if ch < 0 {
					return c.errorf(c.pos, "unexpected end of input in object")
				}
				return c.errorf(c.pos, "%s after member name (want ':')", describeByte(byte(ch)))
			}
			c.pos++
			c.tape = append(c.tape, ':')
			if c.skipSpace() < 0 {
				return c.errorf(c.pos, "unexpected end of input in object")
			}
			m.firstObj = len(c.objs)
			if err := c.value(); err != nil {
				return err
			}
			m.end = len(c.tape)
			c.pending = append(c.pending, m)
			ch = c.skipSpace()
			if ch == ',' {
				c.pos++
				c.tape = append(c.tape, ',')
				ch = c.skipSpace()
				continue
			}
			if ch == '}' {
				break
			}
			if ch < 0 {
				return c.errorf(c.pos, "unexpected end of input in object")
			}
			return c.errorf(c.pos, "%s after object member (want ',' or '}')", describeByte(byte(ch)))
		}
	}
	c.pos++
	c.tape = append(c.tape, '}')
	c.depth--

	ms := c.pending[base:]
	sorted := true
	for i := 1; i < len(ms); i++ {
		switch r := c.compare(&ms[i-1], &ms[i]); {
		case r == 0:
			return c.errorf(ms[i].off, "duplicate member name")
		case r > 0:
			sorted = false
		}
		if !sorted {
			break
		}
	}
	if !sorted {
		slices.SortFunc(ms, c.compareMembers)
		for i := 1; i < len(ms); i++ {
			if c.compare(&ms[i-1], &ms[i]) == 0 {
				// Report the later of the two in the input.
				return c.errorf(max(ms[i-1].off, ms[i].off), "duplicate member name")
			}
		}
	}
	c.open = c.open[:len(c.open)-1]
	o := &c.objs[idx]
	o.end, o.next = len(c.tape), len(c.objs)
	if !sorted || o.dirty {
		c.reorder = true
		o.dirty = true
		o.mem, o.nmem = len(c.members), len(ms)
		c.members = append(c.members, ms...)
		if n := len(c.open); n > 0 {
			c.objs[c.open[n-1]].dirty = true
		}
	}
	c.pending = c.pending[:base]
	return nil
}

func (c *canonicalizer) compareMembers(a, b member) int { return c.compare(&a, &b) }

func (c *canonicalizer) compare(a, b *member) int {
	ka, kb := c.tape, c.tape
	if a.inKeys {
		ka = c.keys
	}
	if b.inKeys {
		kb = c.keys
	}
	return compareUTF16(ka[a.keyStart:a.keyEnd], kb[b.keyStart:b.keyEnd])
}

// compareUTF16 orders two valid UTF-8 strings by their UTF-16 code units, as
// RFC 8785 sorts member names. That is code point order except that
// U+E000..U+FFFF sort after the supplementary planes, whose UTF-16 lead
// surrogates are U+D800..U+DBFF.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	if a[i] < 0x80 || b[i] < 0x80 {
		return int(a[i]) - int(b[i])
	}
	// Equal prefixes put both strings on the same rune boundary.
	s := i
	for s > 0 && a[s]&0xc0 == 0x80 {
		s--
	}
	ra, _ := utf8.DecodeRune(a[s:])
	rb, _ := utf8.DecodeRune(b[s:])
	return utf16Order(ra) - utf16Order(rb)
}

func utf16Order(r rune) int {
	if r >= 0xe000 && r <= 0xffff {
		return int(r) + 0x110000
	}
	return int(r)
}

// strSafe marks the bytes that stand for themselves inside a string.
var strSafe = func() (t [256]bool) {
	for i := 0x20; i < 0x80; i++ {
		t[i] = i != '"' && i != '\\'
	}
	return t
}()

// str parses the string at c.pos (a '"') and appends its canonical form. It
// reports whether that form contains an escape.
func (c *canonicalizer) str() (escaped bool, err error) {
	in := c.in
	start := c.pos
	run := start // next byte to copy verbatim
	i := start + 1
	for {
		for i < len(in) && strSafe[in[i]] {
			i++
		}
		if i >= len(in) {
			return false, c.errorf(start, "unterminated string")
		}
		switch ch := in[i]; {
		case ch == '"':
			c.tape = append(c.tape, in[run:i+1]...)
			c.pos = i + 1
			return escaped, nil
		case ch >= 0x80:
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size == 1 {
				return false, c.errorf(i, "invalid UTF-8 in string")
			}
			i += size
		case ch < 0x20:
			return false, c.errorf(i, "unescaped control character in string")
		default: // backslash
			c.tape = append(c.tape, in[run:i]...)
			if i+1 >= len(in) {
				return false, c.errorf(start, "unterminated string")
			}
			switch e := in[i+1]; e {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				c.tape = append(c.tape, '\\', e)
				escaped = true
				i += 2
			case '/':
				c.tape = append(c.tape, '/')
				i += 2
			case 'u':
				r, ok := hex4(in, i+2)
				if !ok {
					return false, c.errorf(i, "invalid \\u escape")
				}
				i += 6
				switch {
				case r >= 0xdc00 && r <= 0xdfff:
					return false, c.errorf(i-6, "lone low surrogate escape")
				case r >= 0xd800 && r <= 0xdbff:
					lo, ok := rune(0), false
					if i+1 < len(in) && in[i] == '\\' && in[i+1] == 'u' {
						lo, ok = hex4(in, i+2)
					}
					if !ok || lo < 0xdc00 || lo > 0xdfff {
						return false, c.errorf(i-6, "lone high surrogate escape")
					}
					i += 6
					r = 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00)
					c.tape = utf8.AppendRune(c.tape, r)
				case r < 0x20 || r == '"' || r == '\\':
					c.tape = appendEscaped(c.tape, byte(r))
					escaped = true
				default:
					c.tape = utf8.AppendRune(c.tape, r)
				}
			default:
				return false, c.errorf(i, "invalid escape in string")
			}
			run = i
		}
	}
}

func hex4(in []byte, i int) (rune, bool) {
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
			r, _ := hex4(s, i+1)
			dst = append(dst, byte(r))
			i += 4
		default: // '"' or '\\'
			dst = append(dst, s[i])
		}
	}
	return dst
}

// number parses the number at c.pos and appends its ECMAScript form.
func (c *canonicalizer) number() error {
	in := c.in
	start := c.pos
	i := start
	if in[i] == '-' {
		i++
	}
	digits := i
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case i < len(in) && in[i] >= '1' && in[i] <= '9':
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
	default:
		return c.errorf(start, "invalid number")
	}
	integer := i - digits
	if i < len(in) && in[i] == '.' {
		i++
		if i >= len(in) || in[i] < '0' || in[i] > '9' {
			return c.errorf(start, "invalid number (no digit after the decimal point)")
		}
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		integer = 0
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if i >= len(in) || in[i] < '0' || in[i] > '9' {
			return c.errorf(start, "invalid number (no digit in the exponent)")
		}
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		integer = 0
	}
	c.pos = i
	// An integer of at most 15 digits is below 2^53 and 1e21: ECMAScript
	// prints it as written, except that -0 is 0.
	if integer > 0 && integer <= 15 {
		if i-start == 2 && in[start] == '-' && in[start+1] == '0' {
			start++
		}
		c.tape = append(c.tape, in[start:i]...)
		return nil
	}
	f, err := strconv.ParseFloat(string(in[start:i]), 64)
	if err != nil { // the grammar is checked, so only out of range
		return c.errorf(start, "number out of the double range")
	}
	c.tape = appendNumber(c.tape, f)
	return nil
}

// appendNumber appends f as ECMAScript's Number.prototype.toString does
// (RFC 8785 section 3.2.2.3); f is finite.
func appendNumber(dst []byte, f float64) []byte {
	if f == 0 { // and -0
		return append(dst, '0')
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		return strconv.AppendFloat(dst, f, 'f', -1, 64)
	}
	n := len(dst)
	dst = strconv.AppendFloat(dst, f, 'e', -1, 64)
	// Go writes at least two exponent digits (1e-07); ECMAScript does not.
	for i := len(dst) - 1; i > n; i-- {
		if dst[i] == 'e' {
			if dst[i+2] == '0' {
				dst = append(dst[:i+2], dst[i+3:]...)
			}
			break
		}
	}
	return dst
}

// emitRange appends tape[s:e] to c.out with the members of dirty objects in
// sorted order; k is the index of the first object at or after s.
func (c *canonicalizer) emitRange(s, e, k int) {
	for k < len(c.objs) && c.objs[k].start < e {
		o := &c.objs[k]
		if !o.dirty {
			k = o.next
			continue
		}
		c.write(c.tape[s:o.start])
		c.out = append(c.out, '{')
		for j, m := range c.members[o.mem : o.mem+o.nmem] {
			if j > 0 {
				c.out = append(c.out, ',')
			}
			c.emitRange(m.start, m.end, m.firstObj)
		}
		c.out = append(c.out, '}')
		s, k = o.end, o.next
	}
	c.write(c.tape[s:e])
}

func (c *canonicalizer) write(b []byte) {
	c.out = append(c.out, b...)
	if c.h != nil && len(c.out) >= flushSize {
		c.h.Write(c.out)
		c.out = c.out[:0]
	}
}
