package idempotency

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

// maxJSONDepth is the deepest nesting of arrays and objects that
// Canonicalize and RequestHash accept; deeper input is ErrInvalidJSON rather
// than unbounded recursion. It equals the limit of encoding/json (and of
// gowebpki/jcs), so any arguments a Go MCP server can decode can be hashed.
const maxJSONDepth = 10000

// emptyObjectHash is RequestHash of absent arguments: the hash of "{}".
const emptyObjectHash = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"

// Canonicalize returns the RFC 8785 (JCS) canonical form of one JSON value:
// no insignificant whitespace, object members sorted by the UTF-16 code units
// of their names, numbers as ECMAScript's Number.prototype.toString prints the
// nearest IEEE 754 double, strings as UTF-8 with only the escapes JCS requires.
//
// One departure keeps numbers exact: a number whose value as written is not the
// value of the shortest decimal of its nearest double (9007199254740993, a
// 25-digit id, 1e-400) is written as that exact value in the notation
// -?[1-9](\.[0-9]*[1-9])?e[+-](0|[1-9][0-9]*) (9.007199254740993e+15), a text
// that no double prints as, unless it is that double printed at a fixed
// precision: written with a '.' or an exponent, with k <= 17 significant digits
// (leading and trailing zeros not counted) that are the double correctly
// rounded to k digits (a tie rounded to even, as C's printf, or up, as
// JavaScript's toPrecision). So 0.10000000000000001 (%.17g of 0.1) is 0.1,
// while the integer literals 72057594037927936 and 72057594037927940, two int64
// ids that are one double, stay apart. Every number that a JavaScript or Go
// encoder writes from a double, at its shortest or at up to 17 digits, keeps
// its RFC 8785 form, and two numbers kept exactly share a canonical form only
// if they have the same value (0 and -0 are both 0). So requests that differ
// beyond a double's precision never replay each other (docs/DESIGN.md, "Request
// hash and dispatch fingerprint").
//
// Input that is not exactly one JSON value (RFC 8259, whitespace around it
// allowed), invalid UTF-8, a lone surrogate escape, two members of one object
// with the same name (compared after unescaping), a number beyond the double
// range, a nonzero number of magnitude below 1e-9999 or with more than 100
// significant digits, nesting of arrays and objects deeper than 10000, or
// more than 256 MiB of input is an error wrapping ErrInvalidJSON. The error
// names the input offset but never quotes the input, which may hold secrets.
// Canonicalize never modifies data.
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
	if !c.reorder {
		return append(dst, c.text...), nil
	}
	dst = slices.Grow(dst, len(c.tape)) // reordering keeps the length
	c.out, c.h = dst, nil
	c.emitRange(0, uint32(len(c.tape)), 0)
	dst, c.out = c.out, nil
	return dst, nil
}

// RequestHash returns "sha256:" followed by the lowercase hex SHA-256 of the
// canonical form of a tool call's arguments (see Canonicalize), computed in
// one streaming pass with one allocation.
//
// Absent arguments hash as "{}" (see ArgumentsOrEmpty): nil or empty input,
// input of only JSON whitespace, and the JSON literal null (what many
// encoders write for an absent map), so a client that omits arguments and one that sends {} or null
// never see a request mismatch. Any other value is hashed as it is; checking
// that arguments are an object is left to the caller.
func RequestHash(arguments []byte) (string, error) {
	if absentArguments(arguments) {
		return emptyObjectHash, nil
	}
	c := getCanonicalizer()
	defer putCanonicalizer(c)
	return c.requestHash(arguments)
}

// RequestHashes returns RequestHash(arguments) and, when the arguments hold a
// number that the previous release hashed otherwise, the hash under the
// previous number rule; otherwise previous is "". The previous rule kept the
// exact value of a number that its nearest double prints as at a fixed
// precision (0.10000000000000001, the double 0.1 printed by %.17g), which the
// current rule reads as that double, and it wrote an integer such as
// 72057594037927936 as 7.2057594037927936e+16, which the current rule writes
// as its plain digits (docs/DESIGN.md, "Request hash and dispatch
// fingerprint"). A record claimed under the previous rule pins previous: a
// caller whose claim is refused as a request mismatch claims again with
// previous, so that the record still matches its own retries while such records
// can live.
func RequestHashes(arguments []byte) (hash, previous string, err error) {
	if absentArguments(arguments) {
		return emptyObjectHash, "", nil
	}
	c := getCanonicalizer()
	defer putCanonicalizer(c)
	if hash, err = c.requestHash(arguments); err != nil || !c.refined {
		return hash, "", err
	}
	c.previousRule = true
	if previous, err = c.requestHash(arguments); err != nil {
		return "", "", err
	}
	return hash, previous, nil
}

// requestHash is RequestHash of arguments that are not absent.
func (c *canonicalizer) requestHash(arguments []byte) (string, error) {
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

func isBlankJSON(b []byte) bool {
	for _, ch := range b {
		if ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r' {
			return false
		}
	}
	return true
}

// The canonicalizer validates the input and writes every token in canonical
// form to the tape. As an object closes it sorts the object's members and,
// when they were out of order, rewrites the object in place in sorted order
// (the top-level object is written to scratch instead), so that the tape of a
// closed object is final. Rewriting in place copies an object's bytes once
// more for each enclosing object that is rewritten, so it is bounded by a
// budget linear in the input. Past the budget, an object that needs sorting
// and every object around it is left in input order and recorded as dirty,
// and an emit pass copies the tape, visiting the members of dirty objects in
// sorted order and copying everything else in runs, so each byte is copied
// once more whatever the nesting. When the parse leaves no dirty object (the
// common case), tape or scratch is the output.
type canonicalizer struct {
	in      []byte
	pos     int
	depth   int
	reorder bool // some object is dirty: the output needs the emit pass

	previousRule bool // numbers follow the rule before printed doubles (see appendLongNumber)
	refined      bool // some number's form is not the previous rule's

	tape    []byte        // canonical tokens in input order
	keys    []byte        // unescaped member names whose canonical form has escapes
	scratch []byte        // an object's members in sorted order, before copying back
	text    []byte        // the canonical text, tape or scratch, unless reorder
	budget  int           // bytes that objects may still be sorted in place
	members []canonMember // the members of open and dirty objects, in input order
	stack   []int32       // indexes into members of the open objects' members
	sorted  []int32       // indexes into members, in name order, of dirty objects
	objs    []canonObject // the open and the dirty objects, in order of '{'
	open    []int         // indexes into objs of the objects still open
	frames  []canonFrame  // the open arrays and objects
	orders  [8]canonOrder // orders sortByPrefix found, by a hash of their prefixes

	out  []byte    // emit target
	h    hash.Hash // when set, emit flushes out into it
	buf  []byte    // pooled emit buffer for hashing
	hash hash.Hash
	sum  [sha256.Size]byte
}

// canonMember is one `"name":value` of an object, located in the tape.
// Positions are 32-bit to keep the hot arrays small; maxCanonicalInput keeps
// them in range.
type canonMember struct {
	prefix           uint64 // the first 8 bytes of the name, big-endian
	start, end       uint32 // the member in the tape, without a separating comma (end set as the object closes)
	keyStart, keyEnd uint32 // the unescaped name, in keys if inKeys, else in tape
	firstObj         uint32 // index in objs of the first object inside the value
	off              uint32 // input offset of the name, for errors
	inKeys           bool
	high             bool // the name has a rune at or above U+E000
}

type canonObject struct {
	start, end uint32 // '{' through '}' in the tape
	mem, nmem  uint32 // sorted[mem:mem+nmem]; only when dirty
	next       uint32 // index in objs of the first object after this one's subtree
	dirty      bool   // this object or one inside it is left to the emit pass
}

const (
	// maxCanonicalInput bounds the input so that the canonical text (at most
	// 5.25 times the input, when 1e20 becomes 100000000000000000000; a number
	// kept exactly grows by less) has 32-bit offsets.
	maxCanonicalInput = 256 << 20
	canonFlushSize    = 16 << 10 // emit chunk handed to the hash
	canonMaxPooled    = 4 << 20  // larger buffers are not kept between calls
)

var canonicalizers = sync.Pool{New: func() any { return new(canonicalizer) }}

func getCanonicalizer() *canonicalizer {
	return canonicalizers.Get().(*canonicalizer)
}

func putCanonicalizer(c *canonicalizer) {
	c.in, c.out, c.h, c.text, c.previousRule = nil, nil, nil, nil, false
	// Only the capacities are checked: every use reslices from [:0], and
	// storing the slices back on every call costs more than the test.
	dropLarge(&c.tape, 1)
	dropLarge(&c.keys, 1)
	dropLarge(&c.scratch, 1)
	dropLarge(&c.buf, 1)
	dropLarge(&c.members, 40)
	dropLarge(&c.stack, 4)
	dropLarge(&c.sorted, 4)
	dropLarge(&c.objs, 24)
	dropLarge(&c.open, 8)
	dropLarge(&c.frames, 12)
	canonicalizers.Put(c)
}

// dropLarge forgets a buffer of more than canonMaxPooled bytes (elements
// of size bytes), so that a pooled canonicalizer does not pin it.
func dropLarge[T any](s *[]T, size int) {
	if cap(*s)*size > canonMaxPooled {
		*s = nil
	}
}

// parse validates c.in and fills the tape.
func (c *canonicalizer) parse(data []byte) error {
	if len(data) > maxCanonicalInput {
		return fmt.Errorf("%w: document larger than %d MiB", ErrInvalidJSON, maxCanonicalInput>>20)
	}
	c.in, c.pos, c.depth, c.reorder, c.refined = data, 0, 0, false, false
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
		return c.errorf(c.pos, "%s after the top-level value", describeJSONByte(c.in[c.pos]))
	}
	if c.text == nil && !c.reorder {
		c.text = c.tape
	}
	return nil
}

func (c *canonicalizer) errorf(off int, format string, args ...any) error {
	return fmt.Errorf("%w: at offset %d: %s", ErrInvalidJSON, off, fmt.Sprintf(format, args...))
}

// describeJSONByte names an unexpected byte without quoting input that might
// be a secret: structural characters are shown, anything else by its class.
func describeJSONByte(b byte) string {
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

// canonFrame is an open array or object of the parse.
type canonFrame struct {
	obj         int32 // index in objs, or -1 for an array
	base        int32 // len(stack) when the object opened
	firstMember int32 // len(members) when the object opened
}

// noFrame is the obj of the frame outside the top-level value.
const noFrame int32 = -2

// popFrame closes the innermost frame and returns the frame now innermost,
// or one whose obj is noFrame.
func (c *canonicalizer) popFrame() canonFrame {
	c.frames = c.frames[:len(c.frames)-1]
	if n := len(c.frames); n > 0 {
		return c.frames[n-1]
	}
	return canonFrame{obj: noFrame}
}

// skipJSONSpace returns the index of the first byte at or after pos that is
// not JSON whitespace and that byte, or len(in) and -1.
func skipJSONSpace(in []byte, pos int) (int, int) {
	for ; pos < len(in); pos++ {
		// One test for the common case: every JSON whitespace is <= ' '.
		if ch := in[pos]; ch > ' ' || ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r' {
			return pos, int(ch)
		}
	}
	return pos, -1
}

// value parses the value at c.pos, which is not whitespace, and appends its
// canonical form to the tape. It is one loop over the tokens with an explicit
// stack of open arrays and objects rather than a recursive descent, so that
// the input position and the tape stay in registers: in and pos are c.in and
// c.pos, and tape is c.tape, which are stored back only around the calls
// that read them (the general string and number paths, an object's close).
// The stack, c.frames, is touched only as arrays and objects open and close:
// top is what a value needs from it.
func (c *canonicalizer) value() error {
	in, pos, tape := c.in[:len(c.in):len(c.in)], c.pos, c.tape
	c.frames = c.frames[:0]
	top := noFrame     // the obj of the innermost frame
	ch := int(in[pos]) // the byte at pos, or -1 at the end of the input
	var err error
	// Labels rather than functions: value parses the value at pos (not
	// whitespace), next continues after a value, member parses an object's
	// member name at pos, closeObject the '}' at pos.
value:
	switch ch {
	case '{':
		if len(c.frames)+1 > maxJSONDepth {
			return c.errorf(pos, "nesting deeper than %d", maxJSONDepth)
		}
		idx := len(c.objs)
		if idx == cap(c.objs) {
			c.objs = slices.Grow(c.objs, 1)
		}
		c.objs = c.objs[:idx+1]
		c.objs[idx] = canonObject{}
		c.objs[idx].start = uint32(len(tape))
		c.open = append(c.open, idx)
		c.frames = append(c.frames, canonFrame{obj: int32(idx), base: int32(len(c.stack)), firstMember: int32(len(c.members))})
		top = int32(idx)
		pos++
		tape = append(tape, '{')
		if pos, ch = skipJSONSpace(in, pos); ch == '}' {
			goto closeObject
		}
		goto member
	case '[':
		if len(c.frames)+1 > maxJSONDepth {
			return c.errorf(pos, "nesting deeper than %d", maxJSONDepth)
		}
		c.frames = append(c.frames, canonFrame{obj: -1})
		top = -1
		pos++
		tape = append(tape, '[')
		if pos, ch = skipJSONSpace(in, pos); ch < 0 {
			return c.errorf(pos, "unexpected end of input in array")
		}
		if ch == ']' {
			pos++
			tape = append(tape, ']')
			top = c.popFrame().obj
			goto next
		}
		goto value
	case '"':
		// A string of up to 15 bytes of printable ASCII without escapes
		// is copied as written, tested in line (as member names are).
		if len(in)-pos >= 24 && cap(tape)-len(tape) >= 16 {
			p := (*[24]byte)(in[pos:])
			t := len(tape)
			*(*[16]byte)(tape[t : t+16]) = *(*[16]byte)(p[:16])
			k, quote := firstSpecial(binary.LittleEndian.Uint64(p[1:9]))
			if k == 8 {
				k, quote = firstSpecial(binary.LittleEndian.Uint64(p[9:17]))
				k += 8
			}
			if quote {
				if k == 15 { // the closing quote is past the 16 bytes copied
					tape = append(tape[:t+16], '"')
				}
				tape = tape[:t+k+2]
				pos += k + 2
				goto next
			}
		}
		c.pos, c.tape = pos, tape
		_, err = c.str()
		pos, tape = c.pos, c.tape
		if err != nil {
			return err
		}
		goto next
	case 't':
		if len(in)-pos < 4 || string(in[pos:pos+4]) != "true" {
			return c.errorf(pos, "invalid literal (want %s)", "true")
		}
		tape = append(tape, "true"...)
		pos += 4
		goto next
	case 'f':
		if len(in)-pos < 5 || string(in[pos:pos+5]) != "false" {
			return c.errorf(pos, "invalid literal (want %s)", "false")
		}
		tape = append(tape, "false"...)
		pos += 5
		goto next
	case 'n':
		if len(in)-pos < 4 || string(in[pos:pos+4]) != "null" {
			return c.errorf(pos, "invalid literal (want %s)", "null")
		}
		tape = append(tape, "null"...)
		pos += 4
		goto next
	default:
		if ch != '-' && (ch < '0' || ch > '9') {
			return c.errorf(pos, "%s where a value was expected", describeJSONByte(byte(ch)))
		}
		if len(in)-pos >= 24 && cap(tape)-len(tape) >= 24 {
			// At most 17 bytes, copied in two fixed moves.
			p := (*[24]byte)(in[pos : pos+24])
			if n, canon := plainNumber(p); n > 0 {
				t := len(tape)
				dst := (*[24]byte)(tape[t : t+24])
				*(*[16]byte)(dst[:16]) = *(*[16]byte)(p[:16])
				*(*[8]byte)(dst[16:]) = *(*[8]byte)(p[16:])
				tape = tape[:t+canon]
				pos += n
				goto next
			}
		}
		c.pos, c.tape = pos, tape
		err = c.number()
		pos, tape = c.pos, c.tape
		if err != nil {
			return err
		}
		goto next
	}

next:
	if top == noFrame {
		c.pos, c.tape = pos, tape
		return nil
	}
	pos, ch = skipJSONSpace(in, pos)
	if top < 0 {
		switch ch {
		case ',':
			pos++
			tape = append(tape, ',')
			if pos, ch = skipJSONSpace(in, pos); ch < 0 {
				return c.errorf(pos, "unexpected end of input in array")
			}
			goto value
		case ']':
			pos++
			tape = append(tape, ']')
			top = c.popFrame().obj
			goto next
		case -1:
			return c.errorf(pos, "unexpected end of input in array")
		default:
			return c.errorf(pos, "%s after array element (want ',' or ']')", describeJSONByte(byte(ch)))
		}
	}
	switch ch {
	case ',':
		pos++
		tape = append(tape, ',')
		pos, ch = skipJSONSpace(in, pos)
		goto member
	case '}':
		goto closeObject
	case -1:
		return c.errorf(pos, "unexpected end of input in object")
	default:
		return c.errorf(pos, "%s after object member (want ',' or '}')", describeJSONByte(byte(ch)))
	}

member:
	{
		if ch != '"' {
			if ch < 0 {
				return c.errorf(pos, "unexpected end of input in object")
			}
			return c.errorf(pos, "%s where a member name was expected", describeJSONByte(byte(ch)))
		}
		id := len(c.members)
		if id == cap(c.members) {
			c.members = slices.Grow(c.members, 1)
		}
		// Written field by field in place: appending a struct literal
		// builds it on the stack and copies it with loads that overlap
		// the stores just made, which stalls.
		c.members = c.members[:id+1]
		m := &c.members[id]
		*m = canonMember{}
		m.start, m.off = uint32(len(tape)), uint32(pos)
		if len(in)-pos >= 24 && cap(tape)-len(tape) >= 16 {
			// The name and what follows go to the tape at once; the
			// tape keeps them only if the name is short and plain.
			p := (*[24]byte)(in[pos:])
			t := len(tape)
			*(*[16]byte)(tape[t : t+16]) = *(*[16]byte)(p[:16])
			w := binary.LittleEndian.Uint64(p[1:9])
			k, quote := firstSpecial(w)
			if k == 8 {
				k, quote = firstSpecial(binary.LittleEndian.Uint64(p[9:17]))
				k += 8
			}
			if quote && k <= 14 {
				m.prefix = bits.ReverseBytes64(w)
				if k < 8 {
					m.prefix &^= math.MaxUint64 >> (8 * uint(k) & 63)
				}
				tape = tape[:t+k+2]
				m.keyStart, m.keyEnd = uint32(t+1), uint32(t+1+k)
				pos += k + 2
				goto colon
			}
		}
		{
			c.pos, c.tape = pos, tape
			var flags int
			flags, err = c.str()
			pos, tape = c.pos, c.tape
			if err != nil {
				return err
			}
			c.nameFields(m, flags)
		}
	colon:
		if pos, ch = skipJSONSpace(in, pos); ch != ':' {
			if ch < 0 {
				return c.errorf(pos, "unexpected end of input in object")
			}
			return c.errorf(pos, "%s after member name (want ':')", describeJSONByte(byte(ch)))
		}
		pos++
		tape = append(tape, ':')
		if pos, ch = skipJSONSpace(in, pos); ch < 0 {
			return c.errorf(pos, "unexpected end of input in object")
		}
		m.firstObj = uint32(len(c.objs))
		c.stack = append(c.stack, int32(id))
		goto value
	}

closeObject:
	pos++
	tape = append(tape, '}')
	{
		f := c.frames[len(c.frames)-1]
		top = c.popFrame().obj
		c.depth = len(c.frames)
		c.pos, c.tape = pos, tape
		err = c.closeObject(int(f.obj), int(f.base), int(f.firstMember))
		tape = c.tape
		if err != nil {
			return err
		}
	}
	goto next
}

// nameFields fills in the name fields of m, whose name str has just
// appended to the tape with the given flags.
func (c *canonicalizer) nameFields(m *canonMember, flags int) {
	key := c.tape[m.start+1 : len(c.tape)-1]
	m.keyStart, m.keyEnd, m.high = m.start+1, uint32(len(c.tape)-1), flags&strHigh != 0
	if flags&strEscaped != 0 {
		m.keyStart, m.inKeys = uint32(len(c.keys)), true
		c.keys = unescapeCanonical(c.keys, key)
		m.keyEnd = uint32(len(c.keys))
		key = c.keys[m.keyStart:]
	}
	if flags&strVerbatim != 0 && int(m.off)+9 <= len(c.in) {
		// Load from the input rather than from the tape just
		// written, and clear what follows the name.
		m.prefix = binary.BigEndian.Uint64(c.in[m.off+1:])
		if len(key) < 8 {
			m.prefix &^= math.MaxUint64 >> (8 * len(key))
		}
	} else {
		m.prefix = namePrefix(key)
	}
}

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

// plainNumber returns the length n of the number at p[0] and the length of
// its canonical form when that form is the number as written, cut after the
// last nonzero digit of its fraction (1234.50 is 1234.5, 10.00 is 10):
// optionally '-', an integer part without a leading zero or a lone 0, a
// fraction of at most 8 digits, at most 15 digits in all, no exponent, not
// below 1e-6 and not -0 (see appendShortDecimal). Otherwise n is 0. It finds
// the digits eight at a time.
func plainNumber(p *[24]byte) (n, canon int) {
	const lo = 0x0101010101010101
	i := 0
	if p[0] == '-' {
		i = 1
	}
	n = digitRun(binary.LittleEndian.Uint64(p[i : i+8]))
	if n == 8 {
		n += digitRun(binary.LittleEndian.Uint64(p[i+8 : i+16]))
	}
	if n == 0 || n > 15 || p[i] == '0' && n > 1 {
		return 0, 0
	}
	d := i + n // the byte after the integer part
	canon = d
	if p[d] == '.' {
		if n > 14 {
			return 0, 0
		}
		w := binary.LittleEndian.Uint64(p[d+1 : d+9])
		f := digitRun(w)
		// Below 1e-6 (0.000000ddd) the canonical form has an exponent.
		if f == 0 || n+f > 15 || p[i] == '0' && w&(1<<48-1) == 0x303030303030 {
			return 0, 0
		}
		// The fraction up to its last nonzero digit, without the point if
		// it has none.
		if x := (w ^ lo*'0') & (math.MaxUint64 >> (64 - 8*uint(f))); x != 0 {
			canon = d + 1 + 8 - bits.LeadingZeros64(x)/8
		}
		d += 1 + f
	}
	if i > 0 && canon == 2 && p[1] == '0' { // -0 is written 0
		return 0, 0
	}
	// A digit here (past eight of the fraction or fifteen in all) leaves
	// the number to number, as an exponent does.
	if c := p[d]; c >= '0' && c <= '9' || c == 'e' || c == 'E' || c == '.' {
		return 0, 0
	}
	return d, canon
}

// digitRun returns how many of the bytes of w (little-endian) are ASCII
// digits before the first that is not, 8 if all are.
func digitRun(w uint64) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	x := w ^ (lo * '0') // a digit is now 0..9
	// A byte of x at or above 10 carries into its high bit, one at or above
	// 0x80 has it already; carries out of a byte come only from one marked.
	return bits.TrailingZeros64((x+lo*(0x80-10)|x)&hi) / 8
}

// closeObject sorts the object objs[idx], whose '}' ends the tape, and makes
// its text final or marks it dirty; base and firstMember are the lengths of
// stack and members when it opened.
func (c *canonicalizer) closeObject(idx, base, firstMember int) error {
	ids := c.stack[base:]
	// Each member ends at the ',' before the next one, the last at the '}':
	// found here rather than stored as each value ends.
	end := uint32(len(c.tape) - 1)
	for k := len(ids) - 1; k >= 0; k-- {
		m := &c.members[ids[k]]
		m.end, end = end, m.start-1
	}
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

// sortedText writes the object at tape[start:], which ends the tape, with
// its members in the order of ids to scratch, and returns that text.
func (c *canonicalizer) sortedText(start uint32, ids []int32) []byte {
	const slack = 64 // members up to this long move in one fixed-size copy
	n := len(c.tape) - int(start)
	buf := slices.Grow(c.scratch[:0], n+slack)[:n+slack]
	c.scratch = buf
	tape := c.tape[:cap(c.tape)]
	buf[0] = '{'
	w := 1
	ms := c.members // loaded once: the stores to buf could alias c
	for _, id := range ids {
		m := &ms[id]
		// The byte after a member is its ',' or the closing '}'.
		s, e := int(m.start), int(m.end)+1
		if e-s <= slack && s+slack <= len(tape) {
			// In 16-byte pieces (a larger array copy calls memmove), two
			// of them unconditionally: most members are short.
			src, dst := (*[slack]byte)(tape[s:s+slack]), (*[slack]byte)(buf[w:w+slack])
			*(*[16]byte)(dst[0:]) = *(*[16]byte)(src[0:])
			*(*[16]byte)(dst[16:]) = *(*[16]byte)(src[16:])
			if e-s > 32 {
				*(*[16]byte)(dst[32:]) = *(*[16]byte)(src[32:])
				*(*[16]byte)(dst[48:]) = *(*[16]byte)(src[48:])
			}
		} else {
			copy(buf[w:], tape[s:e])
		}
		w += e - s
		buf[w-1] = ','
	}
	buf[n-1] = '}'
	return buf[:n]
}

// sortObject sorts the indexes ids of an object's members by name and
// reports whether they were in order already, or reports a duplicate name.
func (c *canonicalizer) sortObject(ids []int32) (sorted bool, err error) {
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

// sortMembers sorts the indexes ids of members by name, or reports a
// duplicate name.
func (c *canonicalizer) sortMembers(ids []int32) error {
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

// sortByPrefix sorts at most 16 ids by the first 8 bytes of their names
// alone, the common case, by insertion, and reports whether any moved. It
// reports !ok, leaving ids as they were, when that cannot decide: two equal
// prefixes or a name with a rune at or above U+E000.
//
// The order found is remembered by the prefixes in input order: the records
// of an array mostly share their names in one order, and checking that the
// prefixes are the same is cheaper than sorting them again. Distinct prefixes
// decide the order whatever the rest of the names.
func (c *canonicalizer) sortByPrefix(ids []int32) (ok, moved bool) {
	ids = ids[:min(len(ids), 16)]
	n := len(ids)
	ms := c.members
	e := &c.orders[(ms[ids[0]].prefix^uint64(n))*0x9e3779b97f4a7c15>>(64-3)]
	// Compared against the remembered order as they are loaded: on a hit
	// (most records) no copy of the prefixes is made.
	hit := e.n == n
	if hit {
		for k, id := range ids {
			if m := &ms[id]; e.prefix[k] != m.prefix || m.high {
				hit = false
				break
			}
		}
	}
	if !hit {
		var ps [16]uint64 // in input order
		for k, id := range ids[:n] {
			m := &ms[id]
			if m.high {
				return false, false
			}
			ps[k] = m.prefix
		}
		var sorted [16]uint64
		var perm [16]uint8
		for k, p := range ps[:n] {
			j := k
			for ; j > 0 && sorted[j-1] > p; j-- {
				sorted[j], perm[j] = sorted[j-1], perm[j-1]
			}
			if j > 0 && sorted[j-1] == p { // the sorted part's largest prefix not above p
				return false, false
			}
			sorted[j], perm[j] = p, uint8(k)
			moved = moved || j != k
		}
		e.n, e.moved, e.prefix, e.perm = n, moved, ps, perm
	}
	if !e.moved {
		return true, false
	}
	if first := ids[0]; ids[n-1]-first == int32(n-1) {
		// The ids, which increase, are consecutive (the common case: no
		// dirty object between the members), so each is first plus its
		// input index.
		for k, i := range e.perm[:n] {
			ids[k] = first + int32(i)
		}
		return true, true
	}
	var is [16]int32
	for k, i := range e.perm[:n] {
		is[k] = ids[i]
	}
	for k := range ids { // a loop: copy would call memmove
		ids[k] = is[k]
	}
	return true, true
}

// canonOrder is an order that sortByPrefix found.
type canonOrder struct {
	n      int
	moved  bool
	prefix [16]uint64 // the names' prefixes in input order
	perm   [16]uint8  // the input index of each name, in name order
}

// compare orders member names by UTF-16 code units.
func (c *canonicalizer) compare(a, b *canonMember) int {
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
	return compareUTF16(ka[a.keyStart:a.keyEnd], kb[b.keyStart:b.keyEnd])
}

// namePrefix is the first 8 bytes of a name, big-endian, zero-padded.
func namePrefix(k []byte) uint64 {
	if len(k) >= 8 {
		return binary.BigEndian.Uint64(k)
	}
	var p uint64
	for i, b := range k {
		p |= uint64(b) << (56 - 8*i)
	}
	return p
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

// appendPlain appends a number written without exponent as it is when that
// is its canonical form (see appendShortDecimal): at most 15 digits, no
// trailing fraction zero, at least 1e-6, and not -0.
func (c *canonicalizer) appendPlain(num, integer, frac []byte) bool {
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

// appendShortDecimal appends the canonical form of the number with the
// given integer, fraction and exponent digits when it can do so without
// converting to binary: a decimal of at most 15 significant digits (DBL_DIG)
// is the shortest decimal that rounds to its double, and from 1e-6 to 1e21
// ECMAScript prints that decimal in plain notation. It reports false for
// other numbers.
func (c *canonicalizer) appendShortDecimal(neg bool, integer, frac, exp []byte) bool {
	// The significant digits are hi followed by lo, without leading or
	// trailing zeros; first is the index of the first one in integer+frac.
	// The grammar allows a leading zero only as the whole integer part.
	hi, lo, first := integer, frac, 0
	if integer[0] == '0' {
		f := 0
		for f < len(frac) && frac[f] == '0' {
			f++
		}
		if f == len(frac) { // zero, or -0
			c.tape = append(c.tape, '0')
			return true
		}
		hi, lo, first = nil, frac[f:], 1+f
	}
	for len(lo) > 0 && lo[len(lo)-1] == '0' {
		lo = lo[:len(lo)-1]
	}
	if len(lo) == 0 {
		for hi[len(hi)-1] == '0' {
			hi = hi[:len(hi)-1]
		}
	}
	k := len(hi) + len(lo)
	if k > 15 {
		return false
	}
	var d [16]byte
	copy(d[:], hi)
	copy(d[len(hi):], lo)
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
	c.tape = appendECMAScript(c.tape, neg, d[:k], n)
	return true
}

const (
	// maxExactDigits and minExactExponent bound the numbers whose exact
	// value the canonical form keeps (see appendLongNumber), so that a
	// hostile number can neither make the canonical text long nor its
	// conversion to binary slow; no real argument comes near them.
	maxExactDigits   = 100
	minExactExponent = -9999
)

// maxDoubleDigits is the most significant digits that a double encoder
// writes (C's %.17g, JavaScript's toPrecision(17)): enough to tell every
// double from its neighbours.
const maxDoubleDigits = 17

// appendLongNumber appends the canonical form of a nonzero number that
// appendShortDecimal left undecided. When the shortest decimal that rounds
// to the number's nearest double has the number's exact value, the number
// is what a double encoder writes and its form is ECMAScript's. So is a
// number written with a '.' or an exponent whose k <= 17 significant digits
// are its nearest double printed, correctly rounded, at k digits: what an
// encoder that prints doubles at a fixed precision writes (%.17g writes
// the double 0.1 as 0.10000000000000001). Otherwise rounding would lose
// digits the client wrote (9007199254740993, a 25-digit id, 1e-400), so the
// form is the exact value in exponent notation, d.ddde±n, a text that no
// double prints as: requests that differ only beyond a double's precision
// never share a hash. An integer literal (no '.', no exponent) is never
// read as a printed double: 72057594037927936 and 72057594037927940, two
// int64 ids that are one double, stay apart; where its exact form would
// read back as one, it is written as its plain digits instead.
//
// With c.previousRule set, the printed-double reading is off: the numbers
// that it changes (c.refined reports them) keep their exact form in
// exponent notation, as they did before it existed (see RequestHashes).
func (c *canonicalizer) appendLongNumber(start int, integer, frac, exp []byte) error {
	printed := len(frac) > 0 || len(exp) > 0 // written with a '.' or an exponent
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
	if k > maxExactDigits {
		return c.errorf(start, "number with more than %d significant digits", maxExactDigits)
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
	if e < minExactExponent {
		return c.errorf(start, "number with an exponent below %d", minExactExponent)
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
		c.tape = appendECMAScript(c.tape, neg, d[:ks], es+1)
		return nil
	}
	if f != 0 && k <= maxDoubleDigits && !c.previousRule && printsAs(f, hi, lo, e) {
		c.refined = true
		if printed {
			c.tape = appendECMAScript(c.tape, neg, d[:ks], es+1)
			return nil
		}
		// An integer literal keeps its exact value, but not the exact
		// form's spelling d.ddde+n, which would read back as a printed
		// double (70000000000000704 is also the double 70000000000000700
		// printed at 17 digits): it stays plain digits, which is canonical.
		if neg {
			c.tape = append(c.tape, '-')
		}
		c.tape = append(c.tape, integer[first:]...)
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

// printsAs reports whether the double f, printed correctly rounded at
// k = len(hi)+len(lo) significant digits, is d.ddd * 10^e, where d.ddd
// are the digits hi followed by lo, the last one not zero. A tie (f exactly
// halfway between two such decimals) prints both ways: C's printf and
// strconv round it to even, JavaScript's toPrecision up. The digits are
// compared as text, not as floats.
func printsAs(f float64, hi, lo []byte, e int) bool {
	k := len(hi) + len(lo)
	var v, p [maxDoubleDigits]byte
	copy(v[copy(v[:], hi):], lo)
	var buf [32]byte
	if x := eDigits(p[:], strconv.AppendFloat(buf[:0], math.Abs(f), 'e', k-1, 64)); x != e {
		return false
	}
	if string(p[:k]) == string(v[:k]) {
		return true
	}
	// Rounding a tie up instead prints other digits only where rounding to
	// even went down, to an even last digit, so without a carry.
	last := k - 1
	if p[last]%2 != 0 || v[last] != p[last]+1 || string(p[:last]) != string(v[:last]) {
		return false
	}
	// The exact value of f (767 digits are enough for any double): a tie
	// when its digit k+1 is 5 and all after it are zeros.
	var exact [800]byte
	t := strconv.AppendFloat(exact[:0], math.Abs(f), 'e', 767, 64)
	if t[k+1] != '5' {
		return false
	}
	// And rounding to even went down: f's own digit at last is p's. Where
	// it went up (an odd digit), rounding up prints the same p.
	own := t[0] // t is d.ddd...: f's digit at last
	if last > 0 {
		own = t[last+1]
	}
	if own != p[last] {
		return false
	}
	for _, ch := range t[k+2 : 2+767] {
		if ch != '0' {
			return false
		}
	}
	return true
}

// eDigits copies the mantissa digits of s, a float in strconv's 'e' format
// (d[.ddd]e±dd[d]), to d, which has room for them, and returns the exponent.
func eDigits(d, s []byte) (exp int) {
	d[0] = s[0]
	i := 1
	if s[1] == '.' {
		for i = 2; s[i] != 'e'; i++ {
			d[i-1] = s[i]
		}
	}
	for _, ch := range s[i+2:] {
		exp = exp*10 + int(ch-'0')
	}
	if s[i+1] == '-' {
		exp = -exp
	}
	return exp
}

// appendECMAScript appends the decimal 0.d * 10^n, d of at most 21 digits
// without leading or trailing zeros, as ECMAScript's Number.prototype.toString
// prints it (RFC 8785 section 3.2.2.3): plain from 1e-6 up to 1e21, otherwise
// in exponent notation with an explicit exponent sign.
func appendECMAScript(dst []byte, neg bool, d []byte, n int) []byte {
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

// emitRange appends tape[s:e] to c.out with the members of dirty objects in
// sorted order; k is the index of the first object at or after s. Only dirty
// objects are left in objs when the parse ends.
func (c *canonicalizer) emitRange(s, e, k uint32) {
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

func (c *canonicalizer) write(b []byte) {
	c.out = append(c.out, b...)
	if c.h != nil && len(c.out) >= canonFlushSize {
		c.h.Write(c.out)
		c.out = c.out[:0]
	}
}
