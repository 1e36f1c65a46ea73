package strictjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want error
	}{
		{`{"a":1,"b":[{"a":1,"A":2}]}`, nil},
		{` [1, "x", null, true, {"\u00e9":1}] `, nil},
		{`"\ud83d\ude00"`, nil},
		{`{"a":1,"a":2}`, ErrRepeated},
		{`{"method":1,"meth\u006fd":2}`, ErrRepeated},
		{`{"x":{"y":[{"z":1,"z":1}]}}`, ErrRepeated},
		{`{"a":NaN}`, ErrSyntax},
		{`{"a":1} {}`, ErrSyntax},
		{`{"a":1`, ErrSyntax},
		{``, ErrSyntax},
		{"\"\xff\"", ErrSyntax},
		{`"\ud800"`, ErrSyntax},
		{`"\udc00\ud800"`, ErrSyntax},
		{`"\ud800\u0041"`, ErrSyntax},
		{strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), ErrDepth},
	} {
		err := Check([]byte(tc.doc))
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%.40q: %v, want %v", tc.doc, err, tc.want)
		}
	}
}

type inner struct {
	ID   string   `json:"id"`
	Keys []string `json:"api_keys"`
}

type outer struct {
	Prefix *string           `json:"key_prefix"`
	Items  []inner           `json:"workspaces"`
	Raw    []json.RawMessage `json:"tools"`
	Any    any               `json:"any"`
	Map    map[string]int    `json:"map"`
	Hidden string            `json:"-"`
	Plain  int
}

func TestDecode(t *testing.T) {
	var o outer
	err := Decode([]byte(`{"key_prefix":"p:","workspaces":[{"id":"w","api_keys":["k"]}],"tools":[{"x":1,"X2":2}],"map":{"a":1,"B":2},"Plain":3}`), &o)
	if err != nil || *o.Prefix != "p:" || o.Items[0].ID != "w" || o.Map["B"] != 2 || o.Plain != 3 {
		t.Fatalf("%v %+v", err, o)
	}
	for _, tc := range []struct {
		doc, path string
		want      error
	}{
		{`{"workspaces":[],"WORKSPACES":[]}`, "WORKSPACES", ErrRepeated},
		{`{"Workspaces":[]}`, "Workspaces", ErrUnknown},
		{`{"workspaces":[{"id":"a","ID":"b"}]}`, "workspaces[0].ID", ErrRepeated},
		{`{"workspaces":[{"id":"a","secret_sk_123":"b"}]}`, "workspaces[0].secret_sk_123", ErrUnknown},
		{`{"workspaces":[{"id":"a","sk live 9":"b"}]}`, "workspaces[0].{member 1}", ErrUnknown},
		{`{"tools":[{"k":1,"\u212a":2}]}`, "tools[0].{member 1}", ErrRepeated}, // Kelvin sign folds to k
		{`{"map":{"a":1,"A":2}}`, "map.A", ErrRepeated},
		{`{"any":{"a":1,"a":1}}`, "any.a", ErrRepeated},
		{`{"Hidden":"x"}`, "Hidden", ErrUnknown},
		{`{"workspaces":[{"id":4242424242424242}]}`, "workspaces.id", ErrType},
	} {
		var o outer
		err := Decode([]byte(tc.doc), &o)
		var se *Error
		if !errors.Is(err, tc.want) || !errors.As(err, &se) || se.Path != tc.path {
			t.Errorf("%s: %v, want %v at %q", tc.doc, err, tc.want, tc.path)
		}
		if err != nil && (strings.Contains(err.Error(), "4242") || strings.Contains(err.Error(), "sk live")) {
			t.Errorf("error quotes the document: %v", err)
		}
	}
	if err := Decode([]byte(`{}`), o); !errors.Is(err, ErrTarget) {
		t.Error("Decode into a non-pointer")
	}
}

func FuzzCheck(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"b":"\ud83d\ude00"}]}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	for _, d := range handWritten {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameCheck(t, data)
		err := Check(data)
		if err == nil && !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		if err == nil {
			var v any
			if json.Unmarshal(data, &v) != nil {
				t.Fatal("accepted what encoding/json cannot read")
			}
		}
	})
}

// TestCheckNumberRange: a number beyond a float64's range is refused (found
// by FuzzCheck: encoding/json cannot read it), naming the path, never the digits.
func TestCheckNumberRange(t *testing.T) {
	big := "1" + strings.Repeat("0", 400)
	err := Check([]byte(`{"a":[` + big + `]}`))
	if !errors.Is(err, ErrNumber) || strings.Contains(err.Error(), "0000") {
		t.Fatalf("Check of a huge number: %v, want ErrNumber without the digits", err)
	}
	if err := Check([]byte(`{"a":1e308,"b":-1e-400,"c":12345678901234567890}`)); err != nil {
		t.Fatalf("numbers a float64 holds (or rounds to): %v", err)
	}
}
