// Package mcpwire reads and writes the JSON-RPC messages of MCP's
// Streamable HTTP transport: a response body that is one JSON message or a
// text/event-stream of them.
package mcpwire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// Message is one JSON-RPC 2.0 message as it was received: a request (Method
// and ID), a notification (Method, no ID) or a response (ID and Result or
// Error). The raw members are the sender's bytes.
type Message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// IsResponse reports whether m answers a request: it has an ID and no
// method.
func (m Message) IsResponse() bool { return m.Method == "" && len(m.ID) > 0 }

// IsRequest reports whether m asks for an answer: a method and an ID.
func (m Message) IsRequest() bool {
	return m.Method != "" && len(m.ID) > 0 && !bytes.Equal(m.ID, []byte("null"))
}

// ErrorObject is a JSON-RPC error's error member.
type ErrorObject struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Decode reads one JSON-RPC message. A batch (an array) or anything but an
// object is an error.
func Decode(data []byte) (Message, error) {
	var m Message
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return m, ErrNotMessage
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return Message{}, ErrNotMessage
	}
	return m, nil
}

// ErrorOf decodes m's error member; ok is false when it has none or it is
// not an error object.
func (m Message) ErrorOf() (e ErrorObject, ok bool) {
	if len(m.Error) == 0 || bytes.Equal(m.Error, []byte("null")) {
		return e, false
	}
	if err := json.Unmarshal(m.Error, &e); err != nil {
		return ErrorObject{}, false
	}
	return e, true
}

// Errors of a body that is not what the transport promises. Their text
// quotes nothing the peer sent.
var (
	ErrNotMessage = errors.New("mcpwire: not a JSON-RPC message")
	ErrTooLarge   = errors.New("mcpwire: stream exceeds its size limit")
)

// Events reads a text/event-stream (the WHATWG server-sent events format)
// and returns the data of each message event.
type Events struct {
	r    *bufio.Reader
	left int64 // bytes that may still be read, one past the limit
}

// NewEvents reads the stream r, of which at most limit bytes are read:
// past it, Next fails with [ErrTooLarge].
func NewEvents(r io.Reader, limit int64) *Events {
	e := &Events{left: limit + 1} // one byte past the limit tells it was passed
	e.r = bufio.NewReader(&limited{r: r, e: e})
	return e
}

type limited struct {
	r io.Reader
	e *Events
}

func (l *limited) Read(p []byte) (int, error) {
	if l.e.left <= 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > l.e.left {
		p = p[:l.e.left]
	}
	n, err := l.r.Read(p)
	l.e.left -= int64(n)
	return n, err
}

// Next returns the data of the next event whose type is message (or
// unnamed) and has data lines. A stream that ends inside an event, before
// the blank line that completes it, discards it (as the format says) and
// returns io.ErrUnexpectedEOF; one that ends between events returns io.EOF.
func (e *Events) Next() ([]byte, error) {
	var (
		data    []byte
		hasData bool
		name    string
		started bool
	)
	for {
		line, err := e.line()
		if err != nil {
			if err == io.EOF && started {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if len(line) == 0 {
			if hasData && (name == "" || name == "message") {
				return data, nil
			}
			data, hasData, name, started = nil, false, "", false
			continue
		}
		started = true
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data, hasData = append(data, value...), true
		case "event":
			name = string(value)
		}
	}
}

// line reads one line without its end (\n, \r\n or \r).
func (e *Events) line() ([]byte, error) {
	var out []byte
	for {
		c, err := e.r.ReadByte()
		if err != nil {
			if err == io.EOF && len(out) > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		switch c {
		case '\n':
			return out, nil
		case '\r':
			if next, err := e.r.Peek(1); err == nil && next[0] == '\n' {
				e.r.ReadByte()
			}
			return out, nil
		}
		out = append(out, c)
	}
}
