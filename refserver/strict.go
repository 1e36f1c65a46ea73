package main

import (
	"strings"

	"github.com/obol-gateway/obol/internal/strictjson"
)

// decodeStrict reads JSON that a person wrote (the configuration file, an
// admin request body) into v with strictjson.Decode: no repeated or
// case-variant member names, no unknown fields, at any depth. Its error
// names the field path, never a value.
func decodeStrict(data []byte, v any) error {
	if err := strictjson.Decode(data, v); err != nil {
		return errorText(strings.TrimPrefix(err.Error(), "strictjson: "))
	}
	return nil
}

// errorText is an error that is only its message.
type errorText string

func (e errorText) Error() string { return string(e) }
