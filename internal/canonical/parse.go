package canonical

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

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
