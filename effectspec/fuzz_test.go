package effectspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSetAtPointer checks SetAtPointer against an independent model: the
// body decoded by encoding/json, the pointer split by a separate tokenizer,
// and the write done on the decoded tree. A success must change exactly the
// one value; a refusal must be one the model also makes.
func FuzzSetAtPointer(f *testing.F) {
	f.Add([]byte(rfc6901Doc), "/foo/1", "idt_k")
	f.Add([]byte(`{"meta":{}}`), "/meta/idempotency.key", "idt_k")
	f.Add([]byte(`{"items":[1,2]}`), "/items/-", "v")
	f.Add([]byte(`{"0":[{"a*":1}]}`), "/0/0/a*", "v")
	f.Add([]byte(``), "/a/0/-", "v")
	f.Add([]byte(`[[],{}]`), "/1/~01", "\"\\")
	f.Fuzz(func(t *testing.T, body []byte, pointer, value string) {
		in := bytes.Clone(body)
		out, err := SetAtPointer(body, pointer, value)
		if !bytes.Equal(in, body) {
			t.Fatal("input modified")
		}
		if err != nil && out != nil {
			t.Fatal("output with error")
		}

		tokens, perr := modelTokens(pointer)
		switch {
		case pointer == "" || perr != nil || !utf8.ValidString(pointer):
			if !errors.Is(err, ErrInvalidPointer) {
				t.Fatalf("pointer %q: got %v, want ErrInvalidPointer", pointer, err)
			}
			return
		case !utf8.ValidString(value):
			if !errors.Is(err, errInvalidKey) {
				t.Fatalf("value %q: got %v, want errInvalidKey", value, err)
			}
			return
		}
		if len(in) == 0 {
			in = []byte("{}")
		}
		doc, derr := strictDecode(in)
		if derr != nil || !utf8.Valid(in) {
			if !errors.Is(err, errInvalidBody) {
				t.Fatalf("body %q: got %v, want errInvalidBody", in, err)
			}
			return
		}
		switch doc.(type) {
		case map[string]any, []any:
		default:
			if !errors.Is(err, errInvalidBody) {
				t.Fatalf("scalar body %q: got %v, want errInvalidBody", in, err)
			}
			return
		}
		want, merr := modelSet(doc, tokens, value)
		if err != nil {
			if !errors.Is(err, errNoTarget) {
				t.Fatalf("%q at %q: unexpected %v", in, pointer, err)
			}
			if merr == nil && !strings.Contains(err.Error(), " occurs ") {
				t.Fatalf("%q at %q: refused (%v) but the model writes it", in, pointer, err)
			}
			return
		}
		if merr != nil {
			t.Fatalf("%q at %q: wrote %q but the model refuses: %v", in, pointer, out, merr)
		}
		got, derr := strictDecode(out)
		if derr != nil {
			t.Fatalf("%q at %q: result %q is not JSON: %v", in, pointer, out, derr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q at %q: more than one value changed: %q", in, pointer, out)
		}
	})
}

// strictDecode is decodeAny that also refuses trailing data.
func strictDecode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

// FuzzParse checks that Parse and ParseList never panic, that every refusal
// is a well-formed *ValidationError, and that a valid spec survives
// json.Marshal and Parse unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte(stripeSpec))
	f.Add([]byte(`{"tool":"t","route":"federated","approval":"required","status":{"retryable":[429]}}`))
	f.Add([]byte(`{"tool":"t","idempotency":{"binding":"body_pointer","pointer":"/a~1b/0"}}`))
	f.Add([]byte(`[{"tool":"a"},{"tool":"a","effect":""}]`))
	f.Add([]byte(`{"tool":"t","status":{"accepted":[200,200.0,"x"]},"x":null}`))
	f.Add([]byte(`{"tool":"t","timeout":"1m30.5s","status":{"in_use":[409,425],"retryable":[503]}}`))
	f.Add([]byte(`[{"tool":"a","timeout":"0s"},{"tool":"b","timeout":"16m","status":{"accepted":[409],"in_use":[409]}}]`))
	f.Add([]byte(`{"tool":"t","idempotency":{"binding":"meta","meta":"com.example/key","window":"1h"},"status":{"tool_error":"definitely_rejected"}}`))
	f.Add([]byte(`{"tool":"t","idempotency":{"binding":"meta","meta":"dev.obol/idempotency-key"}}`))
	f.Add([]byte(`{"tool":"t","idempotency":{"binding":"body_pointer","pointer":"/k","meta":"io.modelcontextprotocol/x"},"status":{"tool_error":"unknown"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkErr := func(err error) {
			probs := fieldErrors(err)
			if len(probs) == 0 || !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("malformed error %T %v", err, err)
			}
			for _, p := range probs {
				if p.Problem == "" || !strings.HasPrefix(p.Error(), "effectspec: ") {
					t.Fatalf("malformed problem %q", p.Error())
				}
			}
		}
		if _, err := ParseList(data); err != nil {
			checkErr(err)
		}
		s, err := Parse(data)
		if err != nil {
			checkErr(err)
			return
		}
		if err := s.check(); err != nil {
			t.Fatalf("Parse accepted what Validate refuses: %v", err)
		}
		if !s.Validated() {
			t.Fatal("Parse returned a spec not marked validated")
		}
		enc, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(enc)
		if err != nil {
			t.Fatalf("%s does not parse again: %v", enc, err)
		}
		if !reflect.DeepEqual(s, again) {
			t.Fatalf("round trip changed the spec: %+v -> %+v", s, again)
		}
	})
}
