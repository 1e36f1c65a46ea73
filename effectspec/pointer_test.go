package effectspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// rfc6901Doc is the document of RFC 6901 section 5.
const rfc6901Doc = `{
      "foo": ["bar", "baz"],
      "": 0,
      "a/b": 1,
      "c%d": 2,
      "e^f": 3,
      "g|h": 4,
      "i\\j": 5,
      "k\"l": 6,
      " ": 7,
      "m~n": 8
   }`

// rfc6901Examples are the JSON string representations of section 5, with the
// raw JSON each one evaluates to.
var rfc6901Examples = []struct{ pointer, raw string }{
	{`/foo`, `["bar", "baz"]`},
	{`/foo/0`, `"bar"`},
	{`/`, `0`},
	{`/a~1b`, `1`},
	{`/c%d`, `2`},
	{`/e^f`, `3`},
	{`/g|h`, `4`},
	{`/i\j`, `5`},
	{`/k"l`, `6`},
	{`/ `, `7`},
	{`/m~0n`, `8`},
}

func TestRFC6901Read(t *testing.T) {
	root, n, err := locate([]byte(rfc6901Doc), nil)
	if err != nil || n != 0 || root.Raw != strings.TrimSpace(rfc6901Doc) {
		t.Fatalf(`"": got %q %d %v`, root.Raw, n, err)
	}
	for _, ex := range rfc6901Examples {
		tokens, err := parsePointer(ex.pointer)
		if err != nil {
			t.Fatalf("%s: %v", ex.pointer, err)
		}
		got, n, err := locate([]byte(rfc6901Doc), tokens)
		if err != nil || n != len(tokens) {
			t.Errorf("%s: resolved %d of %d tokens, %v", ex.pointer, n, len(tokens), err)
			continue
		}
		if got.Raw != ex.raw {
			t.Errorf("%s: got %s, want %s", ex.pointer, got.Raw, ex.raw)
		}
		if rfc6901Doc[got.Index:got.Index+len(got.Raw)] != ex.raw {
			t.Errorf("%s: offset %d does not locate the value", ex.pointer, got.Index)
		}
	}
}

func TestRFC6901Write(t *testing.T) {
	for _, ex := range rfc6901Examples {
		out, err := SetAtPointer([]byte(rfc6901Doc), ex.pointer, "idt_k")
		if err != nil {
			t.Errorf("%s: %v", ex.pointer, err)
			continue
		}
		// Byte for byte: the value's raw text is replaced in place.
		i := strings.Index(rfc6901Doc, ex.raw)
		if ex.pointer == "/" { // anchor on the member, not on the first "0"
			i = strings.Index(rfc6901Doc, `"": 0`) + len(`"": `)
		}
		want := rfc6901Doc[:i] + `"idt_k"` + rfc6901Doc[i+len(ex.raw):]
		if string(out) != want {
			t.Errorf("%s:\ngot  %s\nwant %s", ex.pointer, out, want)
		}
		checkOneChange(t, []byte(rfc6901Doc), out, ex.pointer, "idt_k")
	}
	if _, err := SetAtPointer([]byte(rfc6901Doc), "", "k"); !errors.Is(err, ErrInvalidPointer) {
		t.Errorf(`"": got %v, want ErrInvalidPointer`, err)
	}
}

func TestSetAtPointer(t *testing.T) {
	tests := []struct {
		body, pointer, want string
	}{
		// Replace in place, keeping every other byte.
		{`{"a": 1, "b" : [ true ] }`, `/a`, `{"a": "K", "b" : [ true ] }`},
		{`{"a": {"x": null}}`, `/a`, `{"a": "K"}`},
		{`{"a":[1,2,3]}`, `/a/2`, `{"a":[1,2,"K"]}`},
		{` [ {"id": 1} ] ` + "\n", `/0/id`, ` [ {"id": "K"} ] ` + "\n"},
		{`{"a\u0062":1}`, `/ab`, `{"a\u0062":"K"}`},
		// New members go at the end of their object.
		{`{"a":1}`, `/b`, `{"a":1,"b":"K"}`},
		{`{}`, `/b`, `{"b":"K"}`},
		{`{ }`, `/b`, `{ "b":"K"}`},
		{`{"meta":{}}`, `/meta/idempotency.key`, `{"meta":{"idempotency.key":"K"}}`},
		{`{"x":1}`, `/meta/idempotency.key`, `{"x":1,"meta":{"idempotency.key":"K"}}`},
		// sjson and gjson special characters are member names here.
		{`{}`, `/a*b`, `{"a*b":"K"}`},
		{`{}`, `/a?b`, `{"a?b":"K"}`},
		{`{}`, `/a|b`, `{"a|b":"K"}`},
		{`{}`, `/#`, `{"#":"K"}`},
		{`{}`, `/@this`, `{"@this":"K"}`},
		{`{}`, `/:a`, `{":a":"K"}`},
		{`{}`, `/a\b`, `{"a\\b":"K"}`},
		{`{}`, `/!true`, `{"!true":"K"}`},
		{`{}`, `/[0]`, `{"[0]":"K"}`},
		{`{}`, `/{a}`, `{"{a}":"K"}`},
		{`{}`, `/..`, `{"..":"K"}`},
		{`{}`, `/a~1b~0c`, `{"a/b~c":"K"}`},
		{`{}`, `/~01`, `{"~1":"K"}`},
		{`{}`, `/é`, `{"é":"K"}`},
		{`{}`, `/`, `{"":"K"}`},
		{`{"":{}}`, `//`, `{"":{"":"K"}}`},
		{`{"a*":1,"a":2}`, `/a*`, `{"a*":"K","a":2}`},
		{`{"ab":1}`, `/a?`, `{"ab":1,"a?":"K"}`},
		// Numeric names on objects are members, never indexes.
		{`{}`, `/0`, `{"0":"K"}`},
		{`{"0":1}`, `/0`, `{"0":"K"}`},
		{`{"a":{}}`, `/a/0/1`, `{"a":{"0":{"1":"K"}}}`},
		{`{}`, `/-1`, `{"-1":"K"}`},
		{`{}`, `/-`, `{"-":"K"}`},
		{`{}`, `/01`, `{"01":"K"}`},
		// "-" appends to an array; what follows it is created as objects.
		{`{"items":[1]}`, `/items/-`, `{"items":[1,"K"]}`},
		{`{"items":[]}`, `/items/-`, `{"items":["K"]}`},
		{`{"items":[1]}`, `/items/-/id`, `{"items":[1,{"id":"K"}]}`},
		{`[]`, `/-`, `["K"]`},
		// An empty body reads as {}.
		{``, `/k`, `{"k":"K"}`},
		{``, `/a/0`, `{"a":{"0":"K"}}`},
	}
	for _, tc := range tests {
		out, err := SetAtPointer([]byte(tc.body), tc.pointer, "K")
		if err != nil {
			t.Errorf("%s %s: %v", tc.body, tc.pointer, err)
			continue
		}
		if string(out) != tc.want {
			t.Errorf("%s %s:\ngot  %s\nwant %s", tc.body, tc.pointer, out, tc.want)
		}
		if tc.body != "" {
			checkOneChange(t, []byte(tc.body), out, tc.pointer, "K")
		}
	}
}

func TestSetAtPointerValueEncoding(t *testing.T) {
	for _, v := range []string{``, `"`, `\`, "\n\x00", `</script>`, "é€😀", `a.b*c`} {
		out, err := SetAtPointer([]byte(`{"k":0}`), "/k", v)
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		var got map[string]string
		if err := json.Unmarshal(out, &got); err != nil || got["k"] != v {
			t.Errorf("%q: wrote %s (%v)", v, out, err)
		}
	}
	if _, err := SetAtPointer([]byte(`{}`), "/k", "\xff"); !errors.Is(err, errInvalidKey) {
		t.Errorf("invalid UTF-8 value: got %v", err)
	}
}

func TestSetAtPointerErrors(t *testing.T) {
	tests := []struct {
		body, pointer string
		want          error
		msg           string
	}{
		{`{}`, ``, ErrInvalidPointer, `effectspec: invalid JSON pointer: must not be the document root`},
		{`{}`, `a`, ErrInvalidPointer, `effectspec: invalid JSON pointer: "a" must start with '/'`},
		{`{}`, `/a~`, ErrInvalidPointer, `effectspec: invalid JSON pointer: "/a~": '~' must be followed by '0' or '1'`},
		{`{}`, `/a~2`, ErrInvalidPointer, ``},
		{`{}`, "/\xff", ErrInvalidPointer, `effectspec: invalid JSON pointer: must be valid UTF-8`},
		{`"str"`, `/a`, errInvalidBody, `effectspec: body is not a JSON object or array: top-level value is a string`},
		{`5`, `/a`, errInvalidBody, ``},
		{`null`, `/a`, errInvalidBody, ``},
		{`   `, `/a`, errInvalidBody, `effectspec: body is not a JSON object or array: invalid JSON`},
		{`{"a":1`, `/a`, errInvalidBody, ``},
		{`{"a":1}x`, `/a`, errInvalidBody, ``},
		{`{"a":1} {}`, `/a`, errInvalidBody, ``},
		{"{\"a\":\"\xff\"}", `/b`, errInvalidBody, `effectspec: body is not a JSON object or array: not valid UTF-8`},
		{`{"a":"s"}`, `/a/b`, errNoTarget, `effectspec: pointer has no target in body: /a crosses a string`},
		{`{"a":1}`, `/a/b`, errNoTarget, `effectspec: pointer has no target in body: /a crosses a number`},
		{`{"a":true}`, `/a/0`, errNoTarget, `effectspec: pointer has no target in body: /a crosses a boolean`},
		{`{"a":null}`, `/a/b/c`, errNoTarget, `effectspec: pointer has no target in body: /a crosses a null`},
		{`{"a":[1]}`, `/a/1`, errNoTarget, `effectspec: pointer has no target in body: /a/1: index out of range`},
		{`{"a":[1]}`, `/a/5/x`, errNoTarget, ``},
		{`{"a":[1,2]}`, `/a/01`, errNoTarget, `effectspec: pointer has no target in body: /a/01: "01" is not an array index`},
		{`{"a":[1]}`, `/a/-1`, errNoTarget, ``},
		{`{"a":[1]}`, `/a/x`, errNoTarget, ``},
		{`{"a":[1]}`, `/a/`, errNoTarget, ``},
		{`{"a":[1]}`, `/a/99999999999999999999999`, errNoTarget, ``},
		{`[1]`, `/1`, errNoTarget, ``},
		{`{"a":1,"a":2}`, `/a`, errNoTarget, `effectspec: pointer has no target in body: member /a occurs 2 times`},
		{`{"a":{"b":1},"a":{}}`, `/a/b`, errNoTarget, ``},
		{`{"a\u0062":1,"ab":2}`, `/ab`, errNoTarget, ``},
	}
	for _, tc := range tests {
		body := []byte(tc.body)
		before := bytes.Clone(body)
		out, err := SetAtPointer(body, tc.pointer, "idt_secretvalue")
		if !errors.Is(err, tc.want) || out != nil {
			t.Errorf("%s %q: got %s, %v; want %v", tc.body, tc.pointer, out, err, tc.want)
			continue
		}
		if tc.msg != "" && err.Error() != tc.msg {
			t.Errorf("%s %q: message %q, want %q", tc.body, tc.pointer, err.Error(), tc.msg)
		}
		if !bytes.Equal(body, before) {
			t.Errorf("%s %q: input modified", tc.body, tc.pointer)
		}
		if strings.Contains(err.Error(), "secretvalue") {
			t.Errorf("%s %q: error quotes the value: %v", tc.body, tc.pointer, err)
		}
	}
}

// checkOneChange decodes before and after independently and checks that
// after is before with exactly value written at pointer.
func checkOneChange(t *testing.T, before, after []byte, pointer, value string) {
	t.Helper()
	tokens, err := modelTokens(pointer)
	if err != nil {
		t.Fatalf("%s: %v", pointer, err)
	}
	doc, err := decodeAny(before)
	if err != nil {
		t.Fatalf("decode before: %v", err)
	}
	want, err := modelSet(doc, tokens, value)
	if err != nil {
		t.Fatalf("%s: model refuses a write that SetAtPointer made: %v", pointer, err)
	}
	got, err := decodeAny(after)
	if err != nil {
		t.Fatalf("%s: result is not valid JSON: %v\n%s", pointer, err, after)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: more than the one value changed\nbefore %s\nafter  %s", pointer, before, after)
	}
}

func decodeAny(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data")
	}
	return v, nil
}

// modelTokens is an independent RFC 6901 tokenizer (by replacement order).
func modelTokens(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("not a pointer")
	}
	var out []string
	for _, t := range strings.Split(p[1:], "/") {
		r := strings.NewReplacer("~1", "/", "~0", "~")
		if strings.Count(t, "~") != strings.Count(t, "~0")+strings.Count(t, "~1") {
			return nil, fmt.Errorf("bad escape")
		}
		out = append(out, r.Replace(t))
	}
	return out, nil
}

// modelSet writes value at tokens in a decoded document; missing members
// are created as objects.
func modelSet(doc any, tokens []string, value string) (any, error) {
	if len(tokens) == 0 {
		return value, nil
	}
	tok, rest := tokens[0], tokens[1:]
	switch c := doc.(type) {
	case map[string]any:
		child, ok := c[tok]
		if !ok {
			c[tok] = build(rest, value)
			return c, nil
		}
		v, err := modelSet(child, rest, value)
		if err != nil {
			return nil, err
		}
		c[tok] = v
		return c, nil
	case []any:
		if tok == "-" {
			return append(c, build(rest, value)), nil
		}
		n, err := strconv.Atoi(tok)
		if err != nil || strconv.Itoa(n) != tok || n < 0 || n >= len(c) {
			return nil, fmt.Errorf("bad index %q", tok)
		}
		v, err := modelSet(c[n], rest, value)
		if err != nil {
			return nil, err
		}
		c[n] = v
		return c, nil
	}
	return nil, fmt.Errorf("crosses a %T", doc)
}

func build(tokens []string, value string) any {
	if len(tokens) == 0 {
		return value
	}
	return map[string]any{tokens[0]: build(tokens[1:], value)}
}
