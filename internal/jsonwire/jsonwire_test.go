package jsonwire

import (
	"encoding/json"
	"testing"
)

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "idt_0123", "a\"b", `a\b`, "<", ">", "&", "\x00", "\x1f", "\x7f", "é", "\u2028", "\u2029", "\xff", "tab\there"} {
		checkString(t, s)
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("idt_0123")
	f.Add("<&>\u2028\xff")
	f.Fuzz(checkString)
}

func checkString(t *testing.T, s string) {
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
		t.Errorf("AppendString(%q) = %s, want %s", s, got[1:], want)
	}
}
