package canonical

import (
	"encoding/binary"
	"math"
	"slices"
	"unicode/utf8"
)

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
