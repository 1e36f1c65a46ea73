package mcpwire

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestEvents(t *testing.T) {
	stream := ": comment\r\nevent: prime\r\nid: 1\r\n\r\n" + // no data: skipped
		"data: {\"a\":\r\ndata: 1}\r\n\r\n" + // two data lines
		"event: other\ndata: x\n\n" + // another type: skipped
		"event: message\ndata:{\"b\":2}\n\n" +
		"data: {\"cut\""
	e := NewEvents(strings.NewReader(stream), 1<<10)
	for _, want := range []string{"{\"a\":\n1}", `{"b":2}`} {
		got, err := e.Next()
		if err != nil || string(got) != want {
			t.Fatalf("Next: %q, %v; want %q", got, err, want)
		}
	}
	if _, err := e.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut event: %v", err)
	}
	if _, err := NewEvents(strings.NewReader("data: 1\n\n"), 1<<10).Next(); err != nil {
		t.Fatal(err)
	}
	e = NewEvents(strings.NewReader("data: 1\n\n"), 9)
	if _, err := e.Next(); err != nil {
		t.Fatalf("a stream of exactly the limit: %v", err)
	}
	if _, err := e.Next(); err != io.EOF {
		t.Fatalf("after the last event: %v", err)
	}
	if _, err := NewEvents(strings.NewReader("data: "+strings.Repeat("x", 20)+"\n\n"), 8).Next(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
}

func TestDecode(t *testing.T) {
	m, err := Decode([]byte(` {"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"m"}}`))
	if err != nil || !m.IsResponse() || m.IsRequest() || string(m.ID) != "7" {
		t.Fatalf("%+v %v", m, err)
	}
	if e, ok := m.ErrorOf(); !ok || e.Code != -32602 {
		t.Fatalf("error %+v", e)
	}
	r, _ := Decode([]byte(`{"jsonrpc":"2.0","id":"s","method":"sampling/createMessage"}`))
	n, _ := Decode([]byte(`{"jsonrpc":"2.0","method":"notifications/progress"}`))
	if !r.IsRequest() || r.IsResponse() || n.IsRequest() || n.IsResponse() {
		t.Fatal("request or notification misread")
	}
	for _, bad := range []string{`[]`, `1`, ``, `{"id":`} {
		if _, err := Decode([]byte(bad)); !errors.Is(err, ErrNotMessage) {
			t.Fatalf("%q: %v", bad, err)
		}
	}
}
