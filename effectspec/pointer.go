package effectspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// parsePointer splits an RFC 6901 pointer into its unescaped reference
// tokens. The root pointer "" is refused: propagation writes a member or an
// element, never the whole document.
func parsePointer(p string) ([]string, error) {
	switch {
	case p == "":
		return nil, fmt.Errorf("%w: must not be the document root", ErrInvalidPointer)
	case p[0] != '/':
		return nil, fmt.Errorf("%w: %s must start with '/'", ErrInvalidPointer, quoteTrunc(p))
	case !utf8.ValidString(p):
		return nil, fmt.Errorf("%w: must be valid UTF-8", ErrInvalidPointer)
	}
	tokens := strings.Split(p[1:], "/")
	for i, t := range tokens {
		if !strings.Contains(t, "~") {
			continue
		}
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, fmt.Errorf("%w: %s: '~' must be followed by '0' or '1'", ErrInvalidPointer, quoteTrunc(p))
			}
		}
		// ~1 first, then ~0: "~01" is "~1", never "/".
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

// escapePointer renders tokens as an RFC 6901 pointer, for error messages.
func escapePointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// sjsonKey renders an object member name as one sjson path component: the
// ':' prefix makes a numeric name a member rather than an index, and every
// ASCII punctuation byte is escaped so that none of sjson's or gjson's
// special characters (. * ? | # @ : \ ! [ { ...) keeps its meaning.
func sjsonKey(b *strings.Builder, name string) {
	b.WriteByte(':')
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < 0x80 && !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
}

// SetAtPointer writes value as a JSON string at the RFC 6901 pointer in body
// and returns the new body; body itself is not modified.
//
// Apart from the written value the result is byte for byte the input: an
// existing member or element is replaced in place, a new member is appended
// to its object, and "-" appends to an array. Missing parent members are
// created as objects (a created "0" or "-" is a member name, never an index).
// An empty body reads as {}.
//
// Errors: [ErrInvalidPointer] for a malformed pointer or the root; an error
// whose text begins "effectspec: body is not a JSON object or array" for a
// body that is not one valid JSON object or array, "effectspec: pointer has
// no target in body" when the pointer crosses a string, number, boolean or
// null, names an array index that does not exist (or has leading zeros: no
// padding with nulls; "-" appends), or names a member that occurs more than
// once on its way (RFC 8259 leaves such a document's meaning open), and
// "effectspec: invalid key" when value is not valid UTF-8. Errors never
// quote the body or the value.
func SetAtPointer(body []byte, pointer string, value string) ([]byte, error) {
	tokens, err := parsePointer(pointer)
	if err != nil {
		return nil, err
	}
	if !utf8.ValidString(value) {
		return nil, fmt.Errorf("%w: value is not valid UTF-8", errInvalidKey)
	}
	if len(body) == 0 {
		body = []byte("{}")
	}
	cur, i, err := locate(body, tokens)
	if err != nil {
		return nil, err
	}
	var repl []byte
	if i == len(tokens) {
		// The target exists: replace exactly its bytes.
		repl = gjson.AppendJSONString(nil, value)
	} else {
		// Insert into the deepest existing container with sjson.
		var path strings.Builder
		for j, t := range tokens[i:] {
			if j > 0 {
				path.WriteByte('.')
			}
			if j == 0 && cur.IsArray() {
				path.WriteString("-1") // RFC 6901 "-": append
				continue
			}
			sjsonKey(&path, t)
		}
		repl, err = sjson.SetBytes([]byte(cur.Raw), path.String(), value)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", errNoTarget, pointer, err)
		}
	}
	out := make([]byte, 0, len(body)-len(cur.Raw)+len(repl))
	out = append(out, body[:cur.Index]...)
	out = append(out, repl...)
	out = append(out, body[cur.Index+len(cur.Raw):]...)
	return out, nil
}

// locate walks tokens through body and returns the deepest existing value on
// the path and how many tokens led to it (len(tokens) when the target
// exists). The result's Index is its offset in body.
func locate(body []byte, tokens []string) (gjson.Result, int, error) {
	if !json.Valid(body) {
		return gjson.Result{}, 0, fmt.Errorf("%w: invalid JSON", errInvalidBody)
	}
	if !utf8.Valid(body) {
		return gjson.Result{}, 0, fmt.Errorf("%w: not valid UTF-8", errInvalidBody)
	}
	start := len(body) - len(bytes.TrimLeft(body, " \t\r\n"))
	end := len(bytes.TrimRight(body, " \t\r\n"))
	if c := body[start]; c != '{' && c != '[' {
		return gjson.Result{}, 0, fmt.Errorf("%w: top-level value is a %s", errInvalidBody, kindOf(gjson.ParseBytes(body)))
	}
	cur := gjson.Result{Type: gjson.JSON, Raw: string(body[start:end]), Index: start}
	for i, tok := range tokens {
		switch {
		case cur.IsObject():
			next, n := member(cur, tok)
			if n > 1 {
				return gjson.Result{}, 0, fmt.Errorf("%w: member %s occurs %d times", errNoTarget, escapePointer(tokens[:i+1]), n)
			}
			if n == 0 {
				return cur, i, nil
			}
			cur = next
		case cur.IsArray():
			if tok == "-" {
				return cur, i, nil
			}
			idx, ok := arrayIndex(tok)
			if !ok {
				return gjson.Result{}, 0, fmt.Errorf("%w: %s: %s is not an array index", errNoTarget, escapePointer(tokens[:i+1]), quoteTrunc(tok))
			}
			next, ok := element(cur, idx)
			if !ok {
				return gjson.Result{}, 0, fmt.Errorf("%w: %s: index out of range", errNoTarget, escapePointer(tokens[:i+1]))
			}
			cur = next
		default:
			return gjson.Result{}, 0, fmt.Errorf("%w: %s crosses a %s", errNoTarget, escapePointer(tokens[:i]), kindOf(cur))
		}
	}
	return cur, len(tokens), nil
}

// member finds the member named name in obj and counts its occurrences.
func member(obj gjson.Result, name string) (gjson.Result, int) {
	var found gjson.Result
	n := 0
	obj.ForEach(func(k, v gjson.Result) bool {
		if k.String() == name {
			if n == 0 {
				found = v
			}
			n++
		}
		return true
	})
	return found, n
}

// element returns arr's element idx.
func element(arr gjson.Result, idx int) (gjson.Result, bool) {
	var found gjson.Result
	i := 0
	ok := false
	arr.ForEach(func(_, v gjson.Result) bool {
		if i == idx {
			found, ok = v, true
			return false
		}
		i++
		return true
	})
	return found, ok
}

// arrayIndex parses an RFC 6901 array index: "0" or digits without a leading
// zero.
func arrayIndex(tok string) (int, bool) {
	if tok == "" || len(tok) > 1 && tok[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(tok)
	return n, err == nil
}

func kindOf(r gjson.Result) string {
	switch r.Type {
	case gjson.String:
		return "string"
	case gjson.Number:
		return "number"
	case gjson.True, gjson.False:
		return "boolean"
	case gjson.Null:
		return "null"
	case gjson.JSON:
		if r.IsArray() {
			return "array"
		}
		return "object"
	}
	return "value"
}
