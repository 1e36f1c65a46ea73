package main

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/google/jsonschema-go/jsonschema"
)

// objectSchema is the input schema of a tool configured without one: any
// arguments object.
var objectSchema = json.RawMessage(`{"type":"object"}`)

// inputSchema is a tool's JSON Schema for its arguments, checked when the
// configuration loads: tools/list shows raw, and every call's arguments are
// validated against resolved before any claim.
type inputSchema struct {
	raw      json.RawMessage // as configured, compacted
	resolved *jsonschema.Resolved
}

// parseInputSchema checks raw as a tool's input schema with the JSON Schema
// implementation the MCP SDK uses. It returns why raw cannot be one, in
// words that quote nothing of it: a schema may hold examples or defaults
// that are not for a log.
func parseInputSchema(raw json.RawMessage) (*inputSchema, string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, "must be a JSON Schema object"
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, "is not a valid JSON Schema"
	}
	// The SDK refuses to serve a tool whose schema is not of type object,
	// and arguments are always an object.
	if s.Type != "object" {
		return nil, `must have "type": "object"`
	}
	// The drafts the validator implements; another $schema would fail
	// every call.
	switch s.Schema {
	case "", "https://json-schema.org/draft/2020-12/schema",
		"http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft-07/schema#":
	default:
		return nil, "$schema: only draft 2020-12 and draft-07 are supported"
	}
	// x-mcp-header asks the SDK to mirror arguments into request headers
	// and to check them there: arguments would travel twice, and be read by
	// a second parser. Not offered.
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil || hasMember(tree, "x-mcp-header") {
		return nil, "x-mcp-header is not supported"
	}
	// No loader: a remote $ref is an error here, never a fetch. Defaults
	// must match their own schemas.
	resolved, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		return nil, "is not a valid JSON Schema (unresolvable $ref, bad pattern, a default that does not match, or another error)"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, "is not valid JSON"
	}
	return &inputSchema{raw: buf.Bytes(), resolved: resolved}, ""
}

// hasMember reports whether any object in v has a member named name.
func hasMember(v any, name string) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k == name || hasMember(e, name) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasMember(e, name) {
				return true
			}
		}
	}
	return false
}

// check validates the arguments of a call (a JSON object, or empty for
// none). The validator's messages quote the instance, so a failure is one
// fixed refusal: never a value of the arguments.
func (s *inputSchema) check(args []byte) *refusal {
	if s == nil {
		return nil
	}
	var v any = map[string]any{}
	if t := bytes.TrimSpace(args); len(t) > 0 && string(t) != "null" {
		if err := json.Unmarshal(t, &v); err != nil {
			return &refusal{"invalid_arguments", http.StatusBadRequest, "invalid arguments: not a JSON object"}
		}
	}
	if err := s.resolved.Validate(v); err != nil {
		return &refusal{"invalid_arguments", http.StatusBadRequest, "invalid arguments: they do not match the tool's input schema (see inputSchema in tools/list)"}
	}
	return nil
}
