package canonical

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"
	"sync"
)

// maxJSONDepth is the deepest nesting of arrays and objects that
// [JSON] and [Hash] accept; deeper input is ErrInvalidJSON rather
// than unbounded recursion. It equals the limit of encoding/json (and of
// gowebpki/jcs), so any arguments a Go MCP server can decode can be hashed.
const maxJSONDepth = 10000

// emptyObjectHash is [Hash] of absent arguments: the hash of "{}".
const emptyObjectHash = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"

// JSON returns the canonical form of one JSON value, or an error wrapping
// [ErrInvalidJSON] that names the input offset but never quotes the input.
// It is [github.com/obol-gateway/obol/idempotency.Canonicalize], whose doc
// states the rule. JSON never modifies data.
func JSON(data []byte) ([]byte, error) {
	return appendJSON(nil, data)
}

// appendJSON appends the canonical form of data (see [JSON]) to dst
// and returns the extended slice. On error it returns dst unchanged.
func appendJSON(dst, data []byte) ([]byte, error) {
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

// Hash returns "sha256:" followed by the lowercase hex SHA-256 of the
// canonical form of arguments (see [JSON]), computed in one streaming pass
// with one allocation; [Absent] arguments hash as {}. It is
// [github.com/obol-gateway/obol/idempotency.RequestHash].
func Hash(arguments []byte) (string, error) {
	if Absent(arguments) {
		return emptyObjectHash, nil
	}
	c := getCanonicalizer()
	defer putCanonicalizer(c)
	return c.requestHash(arguments)
}

// Hashes returns [Hash](arguments) and, when the arguments hold a number
// that the previous number rule hashed otherwise, the hash under that rule;
// otherwise previous is "". It is
// [github.com/obol-gateway/obol/idempotency.RequestHashes], whose doc says
// what the previous rule was and why a caller needs it.
func Hashes(arguments []byte) (hash, previous string, err error) {
	if Absent(arguments) {
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

// requestHash is [Hash] of arguments that are not absent.
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
