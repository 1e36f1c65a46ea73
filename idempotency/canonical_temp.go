package idempotency

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Canonicalize is a temporary stand-in (encoding/json round trip) until the
// RFC 8785 implementation lands; it is replaced, not kept.
func Canonicalize(data []byte) ([]byte, error) {
	var v any
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidJSON, err)
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
