package mcpwire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// refEvents is a second reading of a whole text/event-stream, written from
// the format (WHATWG, "Interpreting an event stream") rather than from
// Events: the data of each message event, and how the stream ended
// (io.EOF between events, io.ErrUnexpectedEOF inside one).
func refEvents(b []byte) ([][]byte, error) {
	var lines [][]byte
	for len(b) > 0 {
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			// A last line without its end: the event it is in is cut.
			return eventsOf(lines), io.ErrUnexpectedEOF
		}
		lines = append(lines, b[:i])
		if b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n' {
			i++
		}
		b = b[i+1:]
	}
	evs := eventsOf(lines)
	// Lines after the last blank line are an event the stream cut.
	if len(lines) > 0 && len(lines[len(lines)-1]) > 0 {
		return evs, io.ErrUnexpectedEOF
	}
	return evs, io.EOF
}

func eventsOf(lines [][]byte) [][]byte {
	var out [][]byte
	var data []byte
	var has bool
	name := ""
	for _, l := range lines {
		if len(l) == 0 {
			if has && (name == "" || name == "message") {
				out = append(out, data)
			}
			data, has, name = nil, false, ""
			continue
		}
		field, value := l, []byte(nil)
		if i := bytes.IndexByte(l, ':'); i >= 0 {
			field, value = l[:i], l[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if has {
				data = append(data, '\n')
			}
			data, has = append(data, value...), true
		case "event":
			name = string(value)
		}
	}
	return out
}

// FuzzEvents: Events returns the events the second reading finds, and ends
// as it does; under a limit below the stream's length it returns a prefix
// of them and then ErrTooLarge (or the stream's end, if that came first).
func FuzzEvents(f *testing.F) {
	for _, s := range []string{"", "data: 1\n\n", "data:1\r\ndata: 2\r\n\r\n", "event: x\ndata: y\n\n", ": c\n\n",
		"data: cut", "data: 1\n\ndata: 2", "data\n\n", "\r\r\n\n", "event: message\rdata: a\r\r"} {
		f.Add([]byte(s), uint16(len(s)))
	}
	f.Fuzz(func(t *testing.T, stream []byte, limit uint16) {
		want, wantEnd := refEvents(stream)
		got, end := readAll(NewEvents(bytes.NewReader(stream), int64(len(stream))))
		if end != wantEnd || !sameEvents(got, want) {
			t.Fatalf("stream %q: events %q, %v; the format says %q, %v", stream, got, end, want, wantEnd)
		}
		if int(limit) >= len(stream) {
			return
		}
		got, end = readAll(NewEvents(bytes.NewReader(stream), int64(limit)))
		if len(got) > len(want) || !sameEvents(got, want[:len(got)]) {
			t.Fatalf("stream %q under limit %d: events %q, not a prefix of %q", stream, limit, got, want)
		}
		if !errors.Is(end, ErrTooLarge) && end != wantEnd {
			t.Fatalf("stream %q under limit %d ends %v", stream, limit, end)
		}
	})
}

func readAll(e *Events) ([][]byte, error) {
	var out [][]byte
	for {
		d, err := e.Next()
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
}

func sameEvents(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
