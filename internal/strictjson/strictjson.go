// Package strictjson reads JSON that people write (configuration files,
// admin request bodies) and JSON that two parsers must read alike (the
// envelope of an MCP request). encoding/json accepts a repeated member name
// (the last wins), a member whose name differs from a field only in case,
// invalid UTF-8 and lone surrogates (replaced), so two readers of one
// document can see two different documents. This package refuses all of
// them. Errors name the path of the offending member, never a value.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of objects and arrays.
const MaxDepth = 256

// Decode decodes data into v, which must be a non-nil pointer, after
// refusing at any depth what Check refuses, member names that occur twice up
// to case (Unicode simple folding, as encoding/json matches names), and
// members that v's type does not declare by their exact json name. Values of
// type json.RawMessage, interfaces and maps take any names (still unique up
// to case).
func Decode(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return ErrTarget
	}
	if err := walkDoc(data, rv.Type().Elem(), true); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			// Field is a dotted path of Go field names' json names; Value
			// would describe the value, which is never shown.
			return &Error{Path: safePath(ute.Field), Err: ErrType}
		}
		return &Error{Err: ErrType}
	}
	return nil
}

// walkDoc validates data as one value; typ guides the unknown-field check
// when strict.
func walkDoc(data []byte, typ reflect.Type, strict bool) error {
	if !utf8.Valid(data) {
		return &Error{Err: ErrSyntax}
	}
	if off, ok := surrogatesOK(data); !ok {
		return &Error{Offset: off, Err: ErrSyntax}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := &walker{dec: dec, strict: strict}
	if err := w.value(typ, "", 0); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Offset: dec.InputOffset(), Err: ErrSyntax}
	}
	return nil
}

type walker struct {
	dec    *json.Decoder
	strict bool
}

func (w *walker) token() (json.Token, error) {
	t, err := w.dec.Token()
	if err != nil {
		return nil, &Error{Offset: w.dec.InputOffset(), Err: ErrSyntax}
	}
	return t, nil
}

func (w *walker) value(typ reflect.Type, path string, depth int) error {
	t, err := w.token()
	if err != nil {
		return err
	}
	if n, ok := t.(json.Number); ok {
		if f, err := n.Float64(); err != nil && math.IsInf(f, 0) {
			return &Error{Path: path, Err: ErrNumber}
		}
		return nil
	}
	d, isDelim := t.(json.Delim)
	if !isDelim {
		return nil
	}
	if depth >= MaxDepth {
		return &Error{Path: path, Err: ErrDepth}
	}
	typ = concrete(typ)
	switch d {
	case '[':
		var elem reflect.Type
		if typ != nil && (typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array) {
			elem = typ.Elem()
		}
		for i := 0; w.dec.More(); i++ {
			if err := w.value(elem, path+"["+strconv.Itoa(i)+"]", depth+1); err != nil {
				return err
			}
		}
	case '{':
		var fields map[string]reflect.Type
		var elem reflect.Type
		switch {
		case typ == nil:
		case typ.Kind() == reflect.Struct:
			fields = structFields(typ)
		case typ.Kind() == reflect.Map:
			elem = typ.Elem()
		}
		seen := map[string]bool{}
		for i := 0; w.dec.More(); i++ {
			t, err := w.token()
			if err != nil {
				return err
			}
			name := t.(string)
			p := join(path, name, i)
			k := name
			if w.strict {
				k = foldKey(name)
			}
			if seen[k] {
				return &Error{Path: p, Err: ErrRepeated}
			}
			seen[k] = true
			vt := elem
			if w.strict && fields != nil {
				ft, ok := fields[name]
				if !ok {
					return &Error{Path: p, Err: ErrUnknown}
				}
				vt = ft
			}
			if err := w.value(vt, p, depth+1); err != nil {
				return err
			}
		}
	}
	_, err = w.token() // the closing delimiter
	return err
}

// concrete strips pointers; it returns nil (any names, any shape) for types
// that decode themselves or hold anything.
func concrete(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface {
		return nil
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return nil
	}
	return t
}

// structFields maps each exported field's json name to its type. Embedded
// structs are not flattened: the documents this package reads have none.
func structFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		m[name] = f.Type
	}
	return m
}

// foldKey maps every name that encoding/json would match to the same key:
// each rune becomes the smallest rune of its simple-fold orbit.
func foldKey(s string) string {
	var b strings.Builder
	for _, r := range s {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(m)
	}
	return b.String()
}

func join(path, name string, i int) string {
	if !plainName(name) {
		name = "{member " + strconv.Itoa(i) + "}"
	}
	if path == "" {
		return name
	}
	return path + "." + name
}

func plainName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// safePath keeps a dotted path from encoding/json only if every segment is
// a plain name.
func safePath(p string) string {
	for seg := range strings.SplitSeq(p, ".") {
		if !plainName(seg) {
			return ""
		}
	}
	return p
}

// surrogatesOK reports whether every \u escape of a UTF-16 surrogate in
// data's strings is half of a pair, and where the first one that is not
// starts. data must be valid UTF-8; invalid JSON is left to the decoder.
func surrogatesOK(data []byte) (int64, bool) {
	inStr := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if !inStr {
			inStr = c == '"'
			continue
		}
		switch c {
		case '"':
			inStr = false
		case '\\':
			if i+1 < len(data) && data[i+1] == 'u' {
				r, ok := hex4(data, i+2)
				if ok && r >= 0xD800 && r <= 0xDBFF {
					lo, ok2 := rune(0), false
					if i+7 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
						lo, ok2 = hex4(data, i+8)
					}
					if !ok2 || lo < 0xDC00 || lo > 0xDFFF {
						return int64(i), false
					}
					i += 11
					continue
				}
				if ok && r >= 0xDC00 && r <= 0xDFFF {
					return int64(i), false
				}
			}
			i++ // skip the escaped byte
		}
	}
	return 0, true
}

func hex4(data []byte, at int) (rune, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(data[at:at+4]), 16, 32)
	return rune(v), err == nil
}
