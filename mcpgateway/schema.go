package mcpgateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/obol-gateway/obol/idempotency"
)

// objectSchema is the input schema of a tool configured without one: any
// arguments object.
const objectSchema = `{"type":"object"}`

func objectSchemaRaw() json.RawMessage { return json.RawMessage(objectSchema) }

// InputSchema is a tool's JSON Schema for its arguments, checked once by
// [ParseInputSchema]: tools/list shows it, and every call's arguments are
// validated against it inside the claim.
type InputSchema struct {
	raw      json.RawMessage // as configured, compacted
	root     *jsonschema.Schema
	resolved *jsonschema.Resolved
}

// ParseInputSchema checks raw as a tool's input schema with the JSON Schema
// implementation the MCP SDK uses, github.com/google/jsonschema-go: type
// object, draft 2020-12 or draft-07, $refs resolved within the schema (no
// fetch), defaults that match, no x-mcp-header, and a finite shape (no
// recursive $ref, no runaway fan-out, keywords written exactly). The error
// wraps [ErrInputSchema] and says why in words that quote nothing of raw: a
// schema may hold examples or defaults that are not for a log.
func ParseInputSchema(raw json.RawMessage) (*InputSchema, error) {
	s, why := parseInputSchema(raw)
	if why != "" {
		return nil, fmt.Errorf("%w %s", ErrInputSchema, why)
	}
	return s, nil
}

// Raw is the schema as given, compacted: what tools/list shows.
func (s *InputSchema) Raw() json.RawMessage { return slices.Clone(s.raw) }

func parseInputSchema(raw json.RawMessage) (*InputSchema, string) {
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
	if why := checkShape(&s); why != "" {
		return nil, why
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, "is not valid JSON"
	}
	return &InputSchema{raw: buf.Bytes(), root: &s, resolved: resolved}, ""
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
// none). A failure is invalid_arguments (400) before any claim: nothing
// recorded, nothing sent (a capability call must pass its own schema and
// then the pinned provider's, whose vendor receives the arguments). The
// validator's messages quote the instance, so a failure is one fixed
// refusal: never a value of the arguments.
func (s *InputSchema) check(args []byte) *refusal { return s.checkWithout(args, "") }

// checkWithout is check of the arguments without the object member at the
// RFC 6901 pointer, if any.
func (s *InputSchema) checkWithout(args []byte, pointer string) *refusal {
	if s == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(idempotency.ArgumentsOrEmpty(args), &v); err != nil {
		// Valid JSON (the front checked it) that does not decode: a
		// number beyond float64.
		return &refusal{reason: "invalid_arguments", status: http.StatusBadRequest, msg: "invalid arguments: a number is out of range"}
	}
	if pointer != "" {
		deleteAt(v, pointer)
	}
	if err := s.resolved.Validate(v); err != nil {
		msg := "invalid arguments: they do not match the tool's input schema"
		if at := s.where(err); at != "" {
			msg += " at " + at
		}
		return &refusal{reason: "invalid_arguments", status: http.StatusBadRequest, msg: msg + " (see inputSchema in tools/list)"}
	}
	return nil
}

// where names the place in the schema that err, a validation error, says
// the arguments broke. Its text is a chain of "validating <schema
// location>: " prefixes, which the validator makes from the schema, then a
// keyword, then a part that quotes the arguments. Only the prefixes and
// the keyword are read, and each only when it is what it should be: the
// deepest location when it names a subschema of this schema, the keyword
// when the validator knows it. So the answer holds names from the
// configuration, never from the call.
func (s *InputSchema) where(err error) string {
	const prefix = "validating "
	text, loc := err.Error(), ""
	for strings.HasPrefix(text, prefix) {
		seg, rest, ok := strings.Cut(text[len(prefix):], ": ")
		if !ok {
			return ""
		}
		loc, text = seg, rest
	}
	kw, _, _ := strings.Cut(text, ":")
	if !slices.Contains(schemaKeywords(), kw) {
		kw = ""
	}
	switch {
	case strings.HasPrefix(loc, "/"):
		if _, ok := pointer(s.root, "#"+loc); !ok {
			return ""
		}
	case kw != "":
		loc = "the top level"
	default:
		return ""
	}
	if kw != "" {
		return loc + " (" + kw + ")"
	}
	return loc
}

// maxSchemaPaths bounds the subschemas one argument value can be checked
// against: every path from the root through applicators and $refs.
const maxSchemaPaths = 4096

// checkShape refuses what would let a call's validation run away. The
// validator recurses on each $ref without a depth limit, so a cycle of
// $refs that never descends into the arguments ({"$ref": "#"} in an allOf)
// overflows the stack, a fatal error no recover catches; and a recursive
// schema, or one whose $refs fan out, can make the work grow exponentially
// with the depth of the arguments a caller sends. So a schema must be a
// finite tree once its $refs are followed: $refs are local JSON pointers
// ("#" or "#/..."), none leads back to a schema it is reached from, and
// the paths through it are at most maxSchemaPaths. $dynamicRef and an $id
// below the root (which moves the base of the $refs under it) are refused.
// The validator also reads keywords regardless of case (where clients read
// "Type" as an unknown member), so keywords must be written exactly.
func checkShape(root *jsonschema.Schema) string {
	const (
		visiting = 1
		done     = 2
	)
	keywords := schemaKeywords()
	state := map[*jsonschema.Schema]int{}
	paths := map[*jsonschema.Schema]int{}
	var why string
	var walk func(s *jsonschema.Schema) int
	walk = func(s *jsonschema.Schema) int {
		if why != "" {
			return 0
		}
		switch state[s] {
		case visiting:
			why = "recursive schemas (a $ref back to a schema it is reached from) are not supported"
			return 0
		case done:
			return paths[s]
		}
		state[s] = visiting
		switch {
		case s.DynamicRef != "" || s.DynamicAnchor != "":
			why = "$dynamicRef and $dynamicAnchor are not supported"
			return 0
		case s.ID != "" && s != root:
			why = "$id is supported only at the root"
			return 0
		}
		// encoding/json matches member names to keywords regardless of
		// case, so the validator reads "Type" as "type" while a client,
		// and the SDK, read it as an unknown member. The validator keeps
		// such a name in Extra too: refuse it there.
		for k := range s.Extra {
			for _, kw := range keywords {
				if strings.EqualFold(k, kw) {
					why = "a keyword written in another case would be read two ways; write JSON Schema keywords exactly"
					return 0
				}
			}
		}
		n := 1
		for _, c := range subschemas(s) {
			n += walk(c)
		}
		if s.Ref != "" {
			target, ok := pointer(root, s.Ref)
			if !ok {
				why = "$ref: only local JSON pointers (\"#\" or \"#/...\") to a subschema are supported"
				return 0
			}
			n += walk(target)
		}
		if n > maxSchemaPaths {
			why = "too many subschemas to check arguments against (at most " + strconv.Itoa(maxSchemaPaths) + " paths)"
			return 0
		}
		state[s], paths[s] = done, n
		return n
	}
	walk(root)
	return why
}

// subschemas are the schemas s applies to its instance or to values in it.
// $defs and definitions are not: they apply only through a $ref.
func subschemas(s *jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for _, c := range []*jsonschema.Schema{s.Items, s.AdditionalItems, s.Contains, s.UnevaluatedItems,
		s.AdditionalProperties, s.PropertyNames, s.UnevaluatedProperties, s.Not, s.If, s.Then, s.Else, s.ContentSchema} {
		if c != nil {
			out = append(out, c)
		}
	}
	for _, l := range [][]*jsonschema.Schema{s.PrefixItems, s.ItemsArray, s.AllOf, s.AnyOf, s.OneOf} {
		out = append(out, l...)
	}
	for _, m := range []map[string]*jsonschema.Schema{s.Properties, s.PatternProperties, s.DependentSchemas, s.DependencySchemas} {
		for _, c := range m {
			out = append(out, c)
		}
	}
	return out
}

// pointer finds the subschema of root that ref, a URI fragment holding a
// JSON pointer, names.
func pointer(root *jsonschema.Schema, ref string) (*jsonschema.Schema, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	frag, err := url.PathUnescape(frag)
	if err != nil || frag != "" && frag[0] != '/' {
		return nil, false
	}
	s := root
	segs := strings.Split(frag, "/")[1:]
	for i := 0; i < len(segs); i++ {
		seg := strings.NewReplacer("~1", "/", "~0", "~").Replace(segs[i])
		single := map[string]*jsonschema.Schema{
			"items": s.Items, "additionalItems": s.AdditionalItems, "contains": s.Contains,
			"unevaluatedItems": s.UnevaluatedItems, "additionalProperties": s.AdditionalProperties,
			"propertyNames": s.PropertyNames, "unevaluatedProperties": s.UnevaluatedProperties,
			"not": s.Not, "if": s.If, "then": s.Then, "else": s.Else, "contentSchema": s.ContentSchema,
		}
		lists := map[string][]*jsonschema.Schema{
			"prefixItems": s.PrefixItems, "items": s.ItemsArray, "allOf": s.AllOf, "anyOf": s.AnyOf, "oneOf": s.OneOf,
		}
		maps := map[string]map[string]*jsonschema.Schema{
			"$defs": s.Defs, "definitions": s.Definitions, "properties": s.Properties,
			"patternProperties": s.PatternProperties, "dependentSchemas": s.DependentSchemas, "dependencies": s.DependencySchemas,
		}
		var next *jsonschema.Schema
		switch {
		case single[seg] != nil:
			next = single[seg]
		case lists[seg] != nil && i+1 < len(segs):
			i++
			j, err := strconv.Atoi(segs[i])
			if err != nil || j < 0 || j >= len(lists[seg]) {
				return nil, false
			}
			next = lists[seg][j]
		case maps[seg] != nil && i+1 < len(segs):
			i++
			next = maps[seg][strings.NewReplacer("~1", "/", "~0", "~").Replace(segs[i])]
		}
		if next == nil {
			return nil, false
		}
		s = next
	}
	return s, true
}

// schemaKeywords are the member names jsonschema.Schema reads: its fields'
// JSON names, and those its UnmarshalJSON reads itself.
func schemaKeywords() []string {
	kws := []string{"type", "items", "dependencies", "const", "minLength", "maxLength", "minItems", "maxItems",
		"minProperties", "maxProperties", "minContains", "maxContains"}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[jsonschema.Schema]()) {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			kws = append(kws, name)
		}
	}
	return kws
}

// Check validates the arguments of a call (a JSON object, or empty for
// none) as the gateway does inside the claim: nil, or an invalid_arguments
// refusal whose message names the place in the schema, never a value.
func (s *InputSchema) Check(args []byte) *Refusal {
	r := s.check(args)
	if r == nil {
		return nil
	}
	return &Refusal{Reason: r.reason, Status: r.status, Message: r.msg}
}

// deleteAt removes the object member at the RFC 6901 pointer from v, a
// decoded JSON value, if it is there.
func deleteAt(v any, pointer string) {
	tokens := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	for i, tok := range tokens {
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		if i == len(tokens)-1 {
			delete(obj, tok)
			return
		}
		v = obj[tok]
	}
}
