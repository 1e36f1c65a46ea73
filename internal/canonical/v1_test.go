package canonical

// This file is the canonicalizer (canonical*.go) as it was before its fast
// paths (strings copied in runs, member orders reused across records, ...),
// kept as the oracle of TestCanonicalizeMatchesV1: the canonical form and
// every error must stay byte-identical. Only its names are changed (prefixed
// v1).

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

const v1maxJSONDepth = 10000

const v1emptyObjectHash = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"

func v1Canonicalize(data []byte) ([]byte, error) {
	return v1appendJSON(nil, data)
}

func v1appendJSON(dst, data []byte) ([]byte, error) {
	c := v1getCanonicalizer()
	defer v1putCanonicalizer(c)
	if err := c.parse(data); err != nil {
		return dst, err
	}
	if !c.reorder {
		return append(dst, c.text...), nil
	}
	dst = slices.Grow(dst, len(c.tape)) // reordering keeps the length
	c.out, c.h = dst, nil
	c.emitRange(0, uint32(len(c.tape)), 0)
	dst, c.out = c.out, nil
	return dst, nil
}

func v1RequestHash(arguments []byte) (string, error) {
	if Absent(arguments) {
		return v1emptyObjectHash, nil
	}
	c := v1getCanonicalizer()
	defer v1putCanonicalizer(c)
	if err := c.parse(arguments); err != nil {
		return "", err
	}
	if !c.reorder {
		c.sum = sha256.Sum256(c.text)
	} else {
		if c.hash == nil {
			c.hash = sha256.New()
		}
		c.hash.Reset()
		c.out, c.h = c.buf[:0], c.hash
		c.emitRange(0, uint32(len(c.tape)), 0)
		c.hash.Write(c.out)
		c.buf, c.out, c.h = c.out[:0], nil, nil
		c.hash.Sum(c.sum[:0])
	}
	var s [len("sha256:") + 2*sha256.Size]byte
	copy(s[:], "sha256:")
	hex.Encode(s[len("sha256:"):], c.sum[:])
	return string(s[:]), nil
}

type v1canonicalizer struct {
	in      []byte
	pos     int
	depth   int
	reorder bool // some object is dirty: the output needs the emit pass

	tape    []byte          // canonical tokens in input order
	keys    []byte          // unescaped member names whose canonical form has escapes
	scratch []byte          // an object's members in sorted order, before copying back
	text    []byte          // the canonical text, tape or scratch, unless reorder
	budget  int             // bytes that objects may still be sorted in place
	members []v1canonMember // the members of open and dirty objects, in input order
	stack   []int32         // indexes into members of the open objects' members
	sorted  []int32         // indexes into members, in name order, of dirty objects
	objs    []v1canonObject // the open and the dirty objects, in order of '{'
	open    []int           // indexes into objs of the objects still open

	out  []byte    // emit target
	h    hash.Hash // when set, emit flushes out into it
	buf  []byte    // pooled emit buffer for hashing
	hash hash.Hash
	sum  [sha256.Size]byte
}

type v1canonMember struct {
	prefix           uint64 // the first 8 bytes of the name, big-endian
	start, end       uint32 // the member in the tape, without a separating comma
	keyStart, keyEnd uint32 // the unescaped name, in keys if inKeys, else in tape
	firstObj         uint32 // index in objs of the first object inside the value
	off              uint32 // input offset of the name, for errors
	inKeys           bool
	high             bool // the name has a rune at or above U+E000
}

type v1canonObject struct {
	start, end uint32 // '{' through '}' in the tape
	mem, nmem  uint32 // sorted[mem:mem+nmem]; only when dirty
	next       uint32 // index in objs of the first object after this one's subtree
	dirty      bool   // this object or one inside it is left to the emit pass
}

const (
	// v1maxCanonicalInput bounds the input so that the canonical text (at most
	// 5.25 times the input, when 1e20 becomes 100000000000000000000; a number
	// kept exactly grows by less) has 32-bit offsets.
	v1maxCanonicalInput = 256 << 20
	v1canonFlushSize    = 16 << 10 // emit chunk handed to the hash
	v1canonMaxPooled    = 4 << 20  // larger buffers are not kept between calls
)

var v1canonicalizers = sync.Pool{New: func() any { return new(v1canonicalizer) }}

func v1getCanonicalizer() *v1canonicalizer {
	return v1canonicalizers.Get().(*v1canonicalizer)
}

func v1putCanonicalizer(c *v1canonicalizer) {
	c.in, c.out, c.h, c.text = nil, nil, nil, nil
	c.tape = v1trimCanonPooled(c.tape, 1)
	c.keys = v1trimCanonPooled(c.keys, 1)
	c.scratch = v1trimCanonPooled(c.scratch, 1)
	c.buf = v1trimCanonPooled(c.buf, 1)
	c.members = v1trimCanonPooled(c.members, 40)
	c.stack = v1trimCanonPooled(c.stack, 4)
	c.sorted = v1trimCanonPooled(c.sorted, 4)
	c.objs = v1trimCanonPooled(c.objs, 24)
	c.open = v1trimCanonPooled(c.open, 8)
	v1canonicalizers.Put(c)
}

func v1trimCanonPooled[T any](s []T, size int) []T {
	if cap(s)*size > v1canonMaxPooled {
		return nil
	}
	return s[:0]
}

func (c *v1canonicalizer) parse(data []byte) error {
	if len(data) > v1maxCanonicalInput {
		return fmt.Errorf("%w: document larger than %d MiB", ErrInvalidJSON, v1maxCanonicalInput>>20)
	}
	c.in, c.pos, c.depth, c.reorder = data, 0, 0, false
	c.budget = 2*len(data) + 4096
	c.tape = slices.Grow(c.tape[:0], len(data))
	c.keys, c.members, c.objs, c.open = c.keys[:0], c.members[:0], c.objs[:0], c.open[:0]
	c.stack, c.sorted = c.stack[:0], c.sorted[:0]
	if c.skipSpace() < 0 {
		return c.errorf(c.pos, "no JSON value")
	}
	c.text = nil
	if err := c.value(); err != nil {
		return err
	}
	if c.skipSpace() >= 0 {
		return c.errorf(c.pos, "%s after the top-level value", v1describeJSONByte(c.in[c.pos]))
	}
	if c.text == nil && !c.reorder {
		c.text = c.tape
	}
	return nil
}

func (c *v1canonicalizer) errorf(off int, format string, args ...any) error {
	return fmt.Errorf("%w: at offset %d: %s", ErrInvalidJSON, off, fmt.Sprintf(format, args...))
}

func v1describeJSONByte(b byte) string {
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

func (c *v1canonicalizer) skipSpace() int {
	in, pos := c.in, c.pos
	for ; pos < len(in); pos++ {
		// One test for the common case: every JSON whitespace is <= ' '.
		if ch := in[pos]; ch > ' ' || ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r' {
			c.pos = pos
			return int(ch)
		}
	}
	c.pos = pos
	return -1
}

func (c *v1canonicalizer) value() error {
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
		return c.errorf(c.pos, "%s where a value was expected", v1describeJSONByte(ch))
	}
}

func (c *v1canonicalizer) literal(lit string) error {
	if len(c.in)-c.pos < len(lit) || string(c.in[c.pos:c.pos+len(lit)]) != lit {
		return c.errorf(c.pos, "invalid literal (want %s)", lit)
	}
	c.tape = append(c.tape, lit...)
	c.pos += len(lit)
	return nil
}

func (c *v1canonicalizer) array() error {
	if c.depth++; c.depth > v1maxJSONDepth {
		return c.errorf(c.pos, "nesting deeper than %d", v1maxJSONDepth)
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
			return c.errorf(c.pos, "%s after array element (want ',' or ']')", v1describeJSONByte(byte(ch)))
		}
	}
}

func (c *v1canonicalizer) object() error {
	if c.depth++; c.depth > v1maxJSONDepth {
		return c.errorf(c.pos, "nesting deeper than %d", v1maxJSONDepth)
	}
	idx := len(c.objs)
	c.objs = append(c.objs, v1canonObject{})
	c.objs[idx].start = uint32(len(c.tape))
	c.open = append(c.open, idx)
	base, firstMember := len(c.stack), len(c.members)
	c.pos++
	c.tape = append(c.tape, '{')
	ch := c.skipSpace()
	if ch != '}' {
		for {
			if ch != '"' {
				if ch < 0 {
					return c.errorf(c.pos, "unexpected end of input in object")
				}
				return c.errorf(c.pos, "%s where a member name was expected", v1describeJSONByte(byte(ch)))
			}
			m := v1canonMember{start: uint32(len(c.tape)), off: uint32(c.pos)}
			flags, err := c.str()
			if err != nil {
				return err
			}
			key := c.tape[m.start+1 : len(c.tape)-1]
			m.keyStart, m.keyEnd, m.high = m.start+1, uint32(len(c.tape)-1), flags&v1strHigh != 0
			if flags&v1strEscaped != 0 {
				m.keyStart, m.inKeys = uint32(len(c.keys)), true
				c.keys = v1unescapeCanonical(c.keys, key)
				m.keyEnd = uint32(len(c.keys))
				key = c.keys[m.keyStart:]
			}
			if flags&v1strVerbatim != 0 && int(m.off)+9 <= len(c.in) {
				// Load from the input rather than from the tape just
				// written, and clear what follows the name.
				m.prefix = binary.BigEndian.Uint64(c.in[m.off+1:])
				if len(key) < 8 {
					m.prefix &^= math.MaxUint64 >> (8 * len(key))
				}
			} else {
				m.prefix = v1namePrefix(key)
			}
			if ch = c.skipSpace(); ch != ':' {
				if ch < 0 {
					return c.errorf(c.pos, "unexpected end of input in object")
				}
				return c.errorf(c.pos, "%s after member name (want ':')", v1describeJSONByte(byte(ch)))
			}
			c.pos++
			c.tape = append(c.tape, ':')
			if c.skipSpace() < 0 {
				return c.errorf(c.pos, "unexpected end of input in object")
			}
			m.firstObj = uint32(len(c.objs))
			if err := c.value(); err != nil {
				return err
			}
			c.stack = append(c.stack, int32(len(c.members)))
			c.members = append(c.members, m)
			// Set after the copy: copying a struct just written to stalls.
			c.members[len(c.members)-1].end = uint32(len(c.tape))
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
			return c.errorf(c.pos, "%s after object member (want ',' or '}')", v1describeJSONByte(byte(ch)))
		}
	}
	c.pos++
	c.tape = append(c.tape, '}')
	c.depth--

	ids := c.stack[base:]
	sorted, err := c.sortObject(ids)
	if err != nil {
		return err
	}
	c.open = c.open[:len(c.open)-1]
	o := &c.objs[idx]
	final := !o.dirty
	if final && !sorted {
		switch n := len(c.tape) - int(o.start); {
		case c.depth == 0: // the top-level value: scratch is the output
			c.text = c.sortedText(o.start, ids)
		case n <= c.budget:
			c.budget -= n
			copy(c.tape[o.start:], c.sortedText(o.start, ids))
		default:
			final = false
		}
	}
	if final {
		// The object's text is final: forget it and what it holds.
		c.objs, c.members, c.stack = c.objs[:idx], c.members[:firstMember], c.stack[:base]
		return nil
	}
	c.reorder = true
	o.end, o.next, o.dirty = uint32(len(c.tape)), uint32(len(c.objs)), true
	o.mem, o.nmem = uint32(len(c.sorted)), uint32(len(ids))
	c.sorted = append(c.sorted, ids...)
	if n := len(c.open); n > 0 {
		c.objs[c.open[n-1]].dirty = true
	}
	c.stack = c.stack[:base]
	return nil
}

func (c *v1canonicalizer) sortedText(start uint32, ids []int32) []byte {
	const slack = 32 // members up to this long move in one fixed-size copy
	n := len(c.tape) - int(start)
	buf := slices.Grow(c.scratch[:0], n+slack)[:n+slack]
	c.scratch = buf
	tape := c.tape[:cap(c.tape)]
	buf[0] = '{'
	w := 1
	for _, id := range ids {
		m := &c.members[id]
		// The byte after a member is its ',' or the closing '}'.
		s, e := int(m.start), int(m.end)+1
		if e-s <= slack && s+slack <= len(tape) {
			*(*[slack]byte)(buf[w : w+slack]) = *(*[slack]byte)(tape[s:])
		} else {
			copy(buf[w:], tape[s:e])
		}
		w += e - s
		buf[w-1] = ','
	}
	buf[n-1] = '}'
	return buf[:n]
}

func (c *v1canonicalizer) sortObject(ids []int32) (sorted bool, err error) {
	if len(ids) < 2 {
		return true, nil
	}
	if len(ids) <= 16 {
		if ok, moved := c.sortByPrefix(ids); ok {
			return !moved, nil
		}
	}
	ms := c.members
	for i := 1; i < len(ids); i++ {
		r := c.compare(&ms[ids[i-1]], &ms[ids[i]])
		if r == 0 {
			return false, c.errorf(int(ms[ids[i]].off), "duplicate member name")
		}
		if r > 0 {
			return false, c.sortMembers(ids)
		}
	}
	return true, nil
}

func (c *v1canonicalizer) sortMembers(ids []int32) error {
	ms := c.members
	if len(ids) <= 16 {
		for i := 1; i < len(ids); i++ {
			for j := i; j > 0 && c.compare(&ms[ids[j-1]], &ms[ids[j]]) > 0; j-- {
				ids[j-1], ids[j] = ids[j], ids[j-1]
			}
		}
	} else {
		slices.SortFunc(ids, func(a, b int32) int { return c.compare(&ms[a], &ms[b]) })
	}
	for i := 1; i < len(ids); i++ {
		if a, b := &ms[ids[i-1]], &ms[ids[i]]; c.compare(a, b) == 0 {
			return c.errorf(int(max(a.off, b.off)), "duplicate member name")
		}
	}
	return nil
}

func (c *v1canonicalizer) sortByPrefix(ids []int32) (ok, moved bool) {
	var ps [16]uint64
	var is [16]int32
	for k, id := range ids[:min(len(ids), 16)] {
		m := &c.members[id]
		if m.high {
			return false, false
		}
		p, j := m.prefix, k
		for ; j > 0 && ps[j-1] > p; j-- {
			ps[j], is[j] = ps[j-1], is[j-1]
		}
		if j > 0 && ps[j-1] == p { // the sorted part's largest prefix not above p
			return false, false
		}
		ps[j], is[j] = p, id
		moved = moved || j != k
	}
	if moved {
		copy(ids, is[:])
	}
	return true, moved
}

func (c *v1canonicalizer) compare(a, b *v1canonMember) int {
	if !a.high && !b.high {
		// Below U+E000, UTF-8 byte order is UTF-16 code unit order.
		if a.prefix != b.prefix {
			if a.prefix < b.prefix {
				return -1
			}
			return 1
		}
		if a.keyEnd-a.keyStart <= 8 && b.keyEnd-b.keyStart <= 8 {
			return int(a.keyEnd-a.keyStart) - int(b.keyEnd-b.keyStart)
		}
	}
	ka, kb := c.tape, c.tape
	if a.inKeys {
		ka = c.keys
	}
	if b.inKeys {
		kb = c.keys
	}
	return v1compareUTF16(ka[a.keyStart:a.keyEnd], kb[b.keyStart:b.keyEnd])
}

func v1namePrefix(k []byte) uint64 {
	if len(k) >= 8 {
		return binary.BigEndian.Uint64(k)
	}
	var p uint64
	for i, b := range k {
		p |= uint64(b) << (56 - 8*i)
	}
	return p
}

func v1compareUTF16(a, b []byte) int {
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
	return v1utf16Order(ra) - v1utf16Order(rb)
}

func v1utf16Order(r rune) int {
	if r >= 0xe000 && r <= 0xffff {
		return int(r) + 0x110000
	}
	return int(r)
}

var v1strSafe = func() (t [256]bool) {
	for i := 0x20; i < 0x80; i++ {
		t[i] = i != '"' && i != '\\'
	}
	return t
}()

const (
	v1strEscaped  = 1 << iota // the canonical form has an escape
	v1strHigh                 // a rune at or above U+E000 (a UTF-8 lead byte >= 0xEE)
	v1strVerbatim             // the canonical form is the input as written
)

func (c *v1canonicalizer) str() (flags int, err error) {
	in := c.in
	start := c.pos
	run := start // next byte to copy verbatim
	i := start + 1
	for {
		i = v1skipSafe(in, i)
		if i >= len(in) {
			return 0, c.errorf(start, "unterminated string")
		}
		switch ch := in[i]; {
		case ch == '"':
			if run == start {
				flags |= v1strVerbatim
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
			j := v1skipText(in, i)
			if !utf8.Valid(in[i:j]) {
				return 0, c.errorf(v1firstInvalidUTF8(in[:j], i), "invalid UTF-8 in string")
			}
			if v1hasHighRune(in[i:j]) {
				flags |= v1strHigh
			}
			i = j
		case ch < 0x20:
			return 0, c.errorf(i, "unescaped control character in string")
		default: // backslash
			c.tape = append(c.tape, in[run:i]...)
			if i+1 >= len(in) {
				return 0, c.errorf(start, "unterminated string")
			}
			switch e := in[i+1]; e {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				c.tape = append(c.tape, '\\', e)
				flags |= v1strEscaped
				i += 2
			case '/':
				c.tape = append(c.tape, '/')
				i += 2
			case 'u':
				r, ok := v1parseHex4(in, i+2)
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
						lo, ok = v1parseHex4(in, i+2)
					}
					if !ok || lo < 0xdc00 || lo > 0xdfff {
						return 0, c.errorf(i-6, "lone high surrogate escape")
					}
					i += 6
					r = 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00)
					c.tape = utf8.AppendRune(c.tape, r)
					flags |= v1strHigh
				case r < 0x20 || r == '"' || r == '\\':
					c.tape = v1appendEscaped(c.tape, byte(r))
					flags |= v1strEscaped
				default:
					if r >= 0xe000 {
						flags |= v1strHigh
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

func v1skipSafe(in []byte, i int) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(in); i += 8 {
		w := binary.LittleEndian.Uint64(in[i:])
		q, bs := w^(lo*'"'), w^(lo*'\\')
		// Per byte, the high bit is set where the byte is below 0x20, is a
		// quote or a backslash, or is non-ASCII. Borrows can only mark bytes
		// after a marked one, so the lowest mark is exact.
		m := ((w-lo*0x20)&^w | (q-lo)&^q | (bs-lo)&^bs | w) & hi
		if m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(in) && v1strSafe[in[i]] {
		i++
	}
	return i
}

func v1skipText(in []byte, i int) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(in); i += 8 {
		w := binary.LittleEndian.Uint64(in[i:])
		q, bs := w^(lo*'"'), w^(lo*'\\')
		// As in v1skipSafe, without marking the bytes that have the high bit.
		m := ((w-lo*0x20)&^w | (q-lo)&^q | (bs-lo)&^bs) & hi
		if m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(in) && (in[i] >= 0x80 || v1strSafe[in[i]]) {
		i++
	}
	return i
}

func v1hasHighRune(b []byte) bool {
	const hi = 0x8080808080808080
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		// Per byte, (b&0x7f)+0x12 reaches 0x80 when b&0x7f >= 0x6e, with no
		// carry into the next byte.
		if w&(w&^hi+0x1212121212121212)&hi != 0 {
			return true
		}
	}
	for ; i < len(b); i++ {
		if b[i] >= 0xee {
			return true
		}
	}
	return false
}

func v1firstInvalidUTF8(in []byte, i int) int {
	for i < len(in) {
		r, size := utf8.DecodeRune(in[i:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		i += size
	}
	return i
}

func v1parseHex4(in []byte, i int) (rune, bool) {
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

func v1appendEscaped(dst []byte, b byte) []byte {
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

func v1unescapeCanonical(dst, s []byte) []byte {
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
			r, _ := v1parseHex4(s, i+1)
			dst = append(dst, byte(r))
			i += 4
		default: // '"' or '\\'
			dst = append(dst, s[i])
		}
	}
	return dst
}

func (c *v1canonicalizer) number() error {
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
	intEnd := i
	fracStart, fracEnd := i, i
	if i < len(in) && in[i] == '.' {
		i++
		if i >= len(in) || in[i] < '0' || in[i] > '9' {
			return c.errorf(start, "invalid number (no digit after the decimal point)")
		}
		fracStart = i
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		fracEnd = i
	}
	exponent := i < len(in) && (in[i] == 'e' || in[i] == 'E')
	if exponent {
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
	}
	c.pos = i
	exp := in[i:i]
	if exponent {
		exp = in[fracEnd+1 : i]
	}
	if !exponent && c.appendPlain(in[start:i], in[digits:intEnd], in[fracStart:fracEnd]) {
		return nil
	}
	if c.appendShortDecimal(start != digits, in[digits:intEnd], in[fracStart:fracEnd], exp) {
		return nil
	}
	return c.appendLongNumber(start, in[digits:intEnd], in[fracStart:fracEnd], exp)
}

func (c *v1canonicalizer) appendPlain(num, integer, frac []byte) bool {
	if len(integer)+len(frac) > 15 || len(frac) > 0 && frac[len(frac)-1] == '0' {
		return false
	}
	if integer[0] == '0' {
		if len(frac) == 0 { // 0 or -0
			c.tape = append(c.tape, '0')
			return true
		}
		if len(frac) > 5 && string(frac[:6]) == "000000" {
			return false
		}
	}
	c.tape = append(c.tape, num...)
	return true
}

func (c *v1canonicalizer) appendShortDecimal(neg bool, integer, frac, exp []byte) bool {
	var d [16]byte // significant digits
	k, zeros, first := 0, 0, -1
	for i, part := range [2][]byte{integer, frac} {
		for j, ch := range part {
			switch {
			case ch == '0' && first < 0:
			case ch == '0':
				zeros++
			default:
				if first < 0 {
					first = j
					if i == 1 {
						first += len(integer)
					}
				}
				if k+zeros >= len(d) {
					return false
				}
				for ; zeros > 0; zeros-- {
					d[k] = '0'
					k++
				}
				d[k] = ch
				k++
			}
		}
	}
	if k == 0 { // zero, or -0
		c.tape = append(c.tape, '0')
		return true
	}
	if k > 15 {
		return false
	}
	// The value is 0.d * 10^n.
	n := len(integer) - first
	if len(exp) > 0 {
		e, sign := 0, 1
		switch exp[0] {
		case '-':
			sign = -1
			fallthrough
		case '+':
			exp = exp[1:]
		}
		for _, ch := range exp {
			if e > 1000 {
				return false
			}
			e = e*10 + int(ch-'0')
		}
		n += sign * e
	}
	if n < -5 || n > 21 { // below 1e-6 or from 1e21: exponent notation
		return false
	}
	c.tape = v1appendECMAScript(c.tape, neg, d[:k], n)
	return true
}

const (
	// v1maxExactDigits and v1minExactExponent bound the numbers whose exact
	// value the canonical form keeps (see appendLongNumber), so that a
	// hostile number can neither make the canonical text long nor its
	// conversion to binary slow; no real argument comes near them.
	v1maxExactDigits   = 100
	v1minExactExponent = -9999
)

func (c *v1canonicalizer) appendLongNumber(start int, integer, frac, exp []byte) error {
	// The significant digits, hi followed by lo, without leading or
	// trailing zeros; first is the index of the first one in integer+frac.
	var hi, lo []byte
	first := 0
	for first < len(integer) && integer[first] == '0' {
		first++
	}
	last := len(frac) - 1
	for last >= 0 && frac[last] == '0' {
		last--
	}
	switch {
	case first == len(integer): // 0.000ddd: appendShortDecimal took zero
		f := 0
		for frac[f] == '0' {
			f++
		}
		first += f
		lo = frac[f : last+1]
	case last >= 0:
		hi, lo = integer[first:], frac[:last+1]
	default:
		n := len(integer)
		for integer[n-1] == '0' {
			n--
		}
		hi = integer[first:n]
	}
	k := len(hi) + len(lo)
	if k > v1maxExactDigits {
		return c.errorf(start, "number with more than %d significant digits", v1maxExactDigits)
	}
	x, neg := 0, false // the exponent as written, saturated
	if len(exp) > 0 {
		switch exp[0] {
		case '-':
			neg = true
			fallthrough
		case '+':
			exp = exp[1:]
		}
		for _, ch := range exp {
			if x < 1<<40 {
				x = x*10 + int(ch-'0')
			}
		}
		if neg {
			x = -x
		}
	}
	// The value is d.ddd * 10^e.
	e := len(integer) - first - 1 + x
	if e < v1minExactExponent {
		return c.errorf(start, "number with an exponent below %d", v1minExactExponent)
	}
	f, err := strconv.ParseFloat(string(c.in[start:c.pos]), 64)
	if err != nil { // the grammar is checked, so only out of range
		return c.errorf(start, "number out of the double range")
	}
	// The shortest decimal of f, whose digits ECMAScript prints: d[.ddd]e±nn.
	var buf [32]byte
	s := strconv.AppendFloat(buf[:0], math.Abs(f), 'e', -1, 64)
	i := len(s) - 4 // the 'e': the exponent has 2 or 3 digits
	if s[i] != 'e' {
		i--
	}
	es := int(s[i+2]-'0')*10 + int(s[i+3]-'0')
	if i+4 < len(s) {
		es = es*10 + int(s[i+4]-'0')
	}
	if s[i+1] == '-' {
		es = -es
	}
	var d [17]byte
	d[0] = s[0]
	ks := 1
	if i > 1 {
		ks += copy(d[1:], s[2:i])
	}
	neg = c.in[start] == '-'
	// ks == k, tested first, keeps the slices of d in range.
	if f != 0 && es == e && ks == k &&
		string(d[:len(hi)]) == string(hi) && string(d[len(hi):k]) == string(lo) {
		c.tape = v1appendECMAScript(c.tape, neg, d[:ks], es+1)
		return nil
	}
	if neg {
		c.tape = append(c.tape, '-')
	}
	if len(hi) == 0 {
		hi, lo = lo, nil
	}
	c.tape = append(c.tape, hi[0])
	if k > 1 {
		c.tape = append(c.tape, '.')
		c.tape = append(c.tape, hi[1:]...)
		c.tape = append(c.tape, lo...)
	}
	c.tape = append(c.tape, 'e', '+')
	if e < 0 {
		c.tape[len(c.tape)-1] = '-'
		e = -e
	}
	c.tape = strconv.AppendInt(c.tape, int64(e), 10)
	return nil
}

func v1appendECMAScript(dst []byte, neg bool, d []byte, n int) []byte {
	if neg {
		dst = append(dst, '-')
	}
	k := len(d)
	switch {
	case n > 21 || n < -5:
		dst = append(dst, d[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, d[1:]...)
		}
		dst = append(dst, 'e', '+')
		if n--; n < 0 {
			dst[len(dst)-1] = '-'
			n = -n
		}
		return strconv.AppendInt(dst, int64(n), 10)
	case n >= k:
		dst = append(dst, d...)
		return append(dst, "000000000000000000000"[:n-k]...)
	case n > 0:
		dst = append(dst, d[:n]...)
		dst = append(dst, '.')
		return append(dst, d[n:]...)
	default:
		dst = append(dst, "0.00000"[:2-n]...)
		return append(dst, d...)
	}
}

func (c *v1canonicalizer) emitRange(s, e, k uint32) {
	for int(k) < len(c.objs) && c.objs[k].start < e {
		o := &c.objs[k]
		c.write(c.tape[s:o.start])
		c.out = append(c.out, '{')
		for j, id := range c.sorted[o.mem : o.mem+o.nmem] {
			if j > 0 {
				c.out = append(c.out, ',')
			}
			m := &c.members[id]
			c.emitRange(m.start, m.end, m.firstObj)
		}
		c.out = append(c.out, '}')
		s, k = o.end, o.next
	}
	c.write(c.tape[s:e])
}

func (c *v1canonicalizer) write(b []byte) {
	c.out = append(c.out, b...)
	if c.h != nil && len(c.out) >= v1canonFlushSize {
		c.h.Write(c.out)
		c.out = c.out[:0]
	}
}
