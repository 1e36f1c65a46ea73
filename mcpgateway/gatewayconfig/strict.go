package gatewayconfig

import (
	"encoding/json"
	"strings"

	"github.com/obol-gateway/obol/internal/strictjson"
	"github.com/obol-gateway/obol/mcpgateway"
)

// decodeStrict reads JSON that a person wrote into v with strictjson.Decode:
// no repeated or case-variant member names, no unknown fields, at any depth.
// Its error names the field path, never a value.
func decodeStrict(data []byte, v any) error {
	if err := strictjson.Decode(data, v); err != nil {
		return errorText(strings.TrimPrefix(err.Error(), "strictjson: "))
	}
	return nil
}

// errorText is an error that is only its message.
type errorText string

func (e errorText) Error() string { return string(e) }

// parseInputSchema checks raw as an input schema of the file; it returns
// why it cannot be one, quoting nothing of it.
func parseInputSchema(raw json.RawMessage) (*mcpgateway.InputSchema, string) {
	sc, err := mcpgateway.ParseInputSchema(raw)
	if err != nil {
		return nil, strings.TrimPrefix(err.Error(), mcpgateway.ErrInputSchema.Error()+" ")
	}
	return sc, ""
}
