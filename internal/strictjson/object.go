package strictjson

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Object splits one JSON object into its members by exact name, refusing
// two names that are equal up to case (as Decode does), so that a
// case-sensitive and a case-insensitive reader find the same members. data
// should have passed Check: Object checks the syntax of the values (a
// syntax error is ErrSyntax, never a panic) but not what is inside them
// (repeated names, number range). The values share data's memory.
func Object(data []byte) (map[string]json.RawMessage, error) {
	var buf [8]Member
	ms, err := Members(buf[:0], data)
	if err != nil {
		return nil, err
	}
	m := make(map[string]json.RawMessage, len(ms))
	for _, mb := range ms {
		m[string(mb.Name)] = mb.Value
	}
	return m, nil
}

// Member is one member of an object.
type Member struct {
	// Name is the member's name, unescaped. It shares the document's
	// memory unless the name has escapes; appending to it never writes
	// into the document.
	Name []byte
	// Value is the value's bytes in the document, without the whitespace
	// around it; appending to it never writes into the document.
	Value json.RawMessage
}

// Members is Object without the map: it appends the members of the object
// data to dst in document order, with Object's rules and errors, and
// returns the extended slice (after an error, with the members read before
// it). With a dst of enough capacity it allocates only for names with
// escapes.
func Members(dst []Member, data []byte) ([]Member, error) {
	s := scanner{data: data}
	s.space()
	if s.i >= len(data) || data[s.i] != '{' {
		return dst, &Error{Err: ErrType}
	}
	s.i++
	s.space()
	base := len(dst)
	var folded map[string]bool // past the ASCII fast path
	if s.i < len(data) && data[s.i] == '}' {
		s.i++
	} else {
		for n := 0; ; n++ {
			if s.i >= len(data) || data[s.i] != '"' {
				return dst, s.syntax().error()
			}
			name, ok := s.name()
			if !ok {
				return dst, s.syntax().error()
			}
			s.space()
			if s.i >= len(data) || data[s.i] != ':' {
				return dst, s.syntax().error()
			}
			s.i++
			s.space()
			start := s.i
			if f := s.value(1); f != nil {
				f.path = append(f.path, segment(name, n))
				return dst, f.error()
			}
			if foldRepeat(dst[base:], name, &folded) {
				return dst, &Error{Path: segment(name, n), Err: ErrRepeated}
			}
			dst = append(dst, Member{Name: name, Value: data[start:s.i:s.i]})
			s.space()
			if s.i >= len(data) {
				return dst, s.syntax().error()
			}
			if data[s.i] == '}' {
				s.i++
				break
			}
			if data[s.i] != ',' {
				return dst, s.syntax().error()
			}
			s.i++
			s.space()
		}
	}
	s.space()
	if s.i != len(data) {
		return dst, s.syntax().error()
	}
	return dst, nil
}

// foldRepeat reports whether name equals the name of one of ms up to case
// (foldKey). While every name is ASCII and the object small, that is an
// ASCII case-insensitive comparison; after that it compares fold keys,
// which *folded then holds for every name of ms.
func foldRepeat(ms []Member, name []byte, folded *map[string]bool) bool {
	if *folded == nil {
		if len(ms) < manyMembers && isASCII(name) {
			for _, prev := range ms {
				if asciiEqualFold(prev.Name, name) {
					return true
				}
			}
			// Every earlier name was ASCII too, or we would have a map.
			return false
		}
		m := make(map[string]bool, 2*len(ms)+1)
		for _, prev := range ms {
			m[foldKey(string(prev.Name))] = true
		}
		*folded = m
	}
	k := foldKey(string(name))
	if (*folded)[k] {
		return true
	}
	(*folded)[k] = true
	return false
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// asciiEqualFold compares two names up to ASCII case; for ASCII names that
// is foldKey's equality (k and s fold with non-ASCII runes too, which both
// names lack).
func asciiEqualFold(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if x|0x20 != y|0x20 || x|0x20 < 'a' || x|0x20 > 'z' {
			return false
		}
	}
	return true
}

// Unquote reads raw, a value from a document that passed [Check] (or a
// Member's Value), if it is a JSON string: its bytes between the quotes
// when it has no escapes (Check refused invalid UTF-8 and control
// characters, so they are the string as encoding/json reads it), else a
// fresh unescaped copy. ok is false for any other value.
func Unquote(raw []byte) (s []byte, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	inner := raw[1 : len(raw)-1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner, true
	}
	return unescape(inner), true
}
