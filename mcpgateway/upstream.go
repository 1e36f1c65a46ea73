package mcpgateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/internal/mcpdirect"
	"github.com/obol-gateway/obol/internal/strictjson"
	"github.com/obol-gateway/obol/retry"
)

// toolView is what of a tool an import may change: what tools/list shows,
// the schema a call's arguments must pass, and whether a new call may be
// sent at all. It is replaced whole, never changed in place.
type toolView struct {
	def    *mcp.Tool
	schema *InputSchema
	// unavailable: the tool calls an upstream MCP server whose tools/list
	// has not been read and the configuration declares no schema, so
	// nothing says what its arguments are.
	unavailable bool
	// pointer is the body_pointer binding's pointer whose property the
	// imported schema dropped: a caller may still send the member (a model
	// told to make it unique), which the gateway overwrites, so the schema
	// is checked without it.
	pointer string
}

// unavailableRetry is the retry_after of a call refused because its
// upstream's tools were not imported yet.
const unavailableRetry = 5 * time.Second

// listedTool is the part of an upstream's tools/list entry an import reads.
type listedTool struct {
	Name        string               `json:"name"`
	Title       string               `json:"title"`
	Description string               `json:"description"`
	InputSchema json.RawMessage      `json:"inputSchema"`
	Annotations *mcp.ToolAnnotations `json:"annotations"`
}

// Import reads the description, input schema and annotations of every
// tool with an Upstream from its upstream's tools/list (docs/DESIGN.md,
// "MCP upstreams"). What the tool's own Description and InputSchema say
// wins; its Spec's hints and [RetryNote] replace the upstream's; the
// property a body_pointer binding writes is dropped from the schema (the
// gateway fills it). Until an Import reads its upstream, a tool with an
// Upstream and no InputSchema is listed with any object as its schema and
// refuses every new call vendor_unreachable, with nothing claimed.
//
// An upstream that cannot be listed, or a tool it does not list or whose
// schema the gateway cannot check, leaves that tool as it was; the error
// names each. Import may run while the gateway serves, and again at any
// time.
func (g *Gateway) Import(ctx context.Context) error {
	g.importMu.Lock()
	defer g.importMu.Unlock()
	var errs []error
	seen := map[*retry.MCPUpstream]bool{}
	for _, name := range g.order {
		t := g.tools[name]
		if t == nil || t.Upstream == nil || seen[t.Upstream] {
			continue
		}
		seen[t.Upstream] = true
		listed, err := t.Upstream.ListTools(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("mcpgateway: import: the upstream of %s: %w", name, err))
			continue
		}
		errs = append(errs, g.importListed(t.Upstream, listed)...)
	}
	return errors.Join(errs...)
}

// importListed imports every tool of u from listed, its tools/list.
func (g *Gateway) importListed(u *retry.MCPUpstream, listed []json.RawMessage) []error {
	byName := map[string]listedTool{}
	for _, raw := range listed {
		var lt listedTool
		if json.Unmarshal(raw, &lt) == nil && lt.Name != "" {
			byName[lt.Name] = lt
		}
	}
	var errs []error
	for _, name := range g.order {
		t := g.tools[name]
		if t == nil || t.Upstream != u {
			continue
		}
		lt, ok := byName[t.Route.UpstreamTool]
		if !ok {
			errs = append(errs, fmt.Errorf("mcpgateway: import: %s: the upstream lists no tool %s", name, t.Route.UpstreamTool))
			continue
		}
		v, why := importView(t, lt)
		if why != "" {
			errs = append(errs, fmt.Errorf("mcpgateway: import: %s: %s", name, why))
			continue
		}
		v.def = g.listing(name, t, v.def.Description, v.schema, v.def.Annotations, lt.Title)
		g.views[name].Store(v)
		g.mcp.AddTool(v.def, g.callTool)
	}
	return errs
}

// importView is t's view with what lt says where t says nothing. Its def
// holds the description and annotations only.
func importView(t *Tool, lt listedTool) (*toolView, string) {
	v := &toolView{schema: t.InputSchema, def: &mcp.Tool{Description: t.Description, Annotations: lt.Annotations}}
	if v.def.Description == "" {
		v.def.Description = lt.Description
	}
	if v.schema == nil && len(lt.InputSchema) > 0 {
		pointer := ""
		if t.Spec.Idempotency.Kind == effectspec.BindingBodyPointer {
			pointer = t.Spec.Idempotency.Pointer
		}
		raw, err := importedSchema(lt.InputSchema, pointer)
		if err != nil {
			return nil, "the upstream's input schema is not a JSON object"
		}
		s, why := parseInputSchema(raw)
		if why != "" {
			return nil, "the upstream's input schema " + why
		}
		v.schema, v.pointer = s, pointer
	}
	return v, ""
}

// importedSchema is an upstream tool's input schema as the gateway lists
// it: without its x-mcp-header annotations (the gateway sends those
// headers to the upstream; its own clients send none) and, when pointer
// is not empty, without the property a body_pointer binding writes (the
// gateway does, so the caller must not) and that property's entry in the
// required list of the object that holds it. A pointer the schema's
// properties do not lead to drops nothing.
func importedSchema(schema json.RawMessage, pointer string) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil || root == nil {
		return nil, errors.New("not an object")
	}
	dropMember(root, "x-mcp-header")
	if pointer != "" {
		dropPointer(root, pointer)
	}
	return json.Marshal(root)
}

// dropMember removes every member named name from the objects of v.
func dropMember(v any, name string) {
	switch v := v.(type) {
	case map[string]any:
		delete(v, name)
		for _, e := range v {
			dropMember(e, name)
		}
	case []any:
		for _, e := range v {
			dropMember(e, name)
		}
	}
}

// dropPointer removes the property pointer names from root, a schema, as
// importedSchema says.
func dropPointer(root map[string]any, pointer string) {
	tokens := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	obj := root
	for i, tok := range tokens {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		props, _ := obj["properties"].(map[string]any)
		if props == nil {
			return
		}
		if i < len(tokens)-1 {
			if obj, _ = props[tok].(map[string]any); obj == nil {
				return
			}
			continue
		}
		delete(props, tok)
		if req, ok := obj["required"].([]any); ok {
			kept := req[:0:0]
			for _, r := range req {
				if r != tok {
					kept = append(kept, r)
				}
			}
			obj["required"] = kept
		}
	}
}

// listing is what tools/list shows of tool t: the description (a generated
// one without it) followed by RetryNote, the schema ({"type": "object"}
// without one), and the upstream's annotations with the spec's hints.
func (g *Gateway) listing(name string, t *Tool, desc string, schema *InputSchema, upstream *mcp.ToolAnnotations, title string) *mcp.Tool {
	def := &mcp.Tool{Name: name, Title: title, Description: desc, InputSchema: objectSchemaRaw()}
	if def.Description == "" {
		def.Description = fmt.Sprintf("%s via %s (idempotency binding %s)", effectName(t.Spec), t.Connection, t.Route.Binding)
	}
	if schema != nil {
		def.InputSchema = schema.raw
	}
	a := annotations([]effectspec.Spec{t.Spec})
	if upstream != nil {
		// The upstream's title and world; what a retry does is the
		// gateway's to say.
		a.Title, a.DestructiveHint, a.OpenWorldHint = upstream.Title, upstream.DestructiveHint, upstream.OpenWorldHint
	}
	def.Annotations = a
	// An Obol-fronted upstream's description ends with the same note.
	def.Description = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(def.Description), RetryNote)) + " " + RetryNote
	return def
}

// check is the refusal of a new call with args: a schema's, or
// vendor_unreachable while the tool is unavailable.
func (v *toolView) check(args []byte) *refusal {
	if v.unavailable {
		return unavailableRefusal()
	}
	return v.schema.checkWithout(args, v.pointer)
}

// unavailableRefusal refuses a new call of a tool whose upstream's tools
// were not imported yet: nothing is claimed, nothing sent.
func unavailableRefusal() *refusal {
	return &refusal{reason: "vendor_unreachable", status: http.StatusServiceUnavailable, retryAfter: unavailableRetry, unread: true,
		msg: "vendor_unreachable: the upstream MCP server's tools were not read yet, so nothing was sent; retry with the same key"}
}

// isUpstreamResult reports whether out is the answer of an upstream MCP
// server's tool, whose stored body is the JSON-RPC result or error object:
// its record's route, or the tool the route names, names an upstream tool.
func (g *Gateway) isUpstreamResult(out retry.Answer) bool {
	r := out.Receipt.Route
	if r.UpstreamTool != "" {
		return true
	}
	t := g.tools[r.Tool]
	return t != nil && t.Route.UpstreamTool != ""
}

// upstreamSpliced is upstreamResult for the result an upstream tool
// usually answers, written through sp as the gateway's own results are (no
// reflection, the body's text once): an object of content (one text item
// of type and text alone), structuredContent, _meta, isError and a
// resultType of "complete", each at most once. The text is written as
// the SDK writes it; structuredContent as the upstream sent it, compacted
// (not through float64: a large integer keeps its digits). ok is false
// for any other body, which upstreamResult renders.
func upstreamSpliced(sp *mcpdirect.Splice, body []byte, meta mcp.Meta, isError bool) (*mcp.CallToolResult, bool) {
	var buf [6]strictjson.Member
	ms, err := strictjson.Members(buf[:0], body)
	if err != nil {
		return nil, false
	}
	var text, structured, upMeta []byte
	for _, m := range ms {
		switch string(m.Name) {
		case "content":
			var ok bool
			if text, ok = upstreamText(m.Value); !ok {
				return nil, false
			}
		case "structuredContent":
			if string(m.Value) != "null" {
				structured = m.Value
			}
		case "_meta":
			upMeta = m.Value
		case "isError":
			// The call's outcome says; the upstream's was classified.
		case "resultType":
			if string(m.Value) != `"complete"` {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	if text == nil {
		return nil, false
	}
	res := &mcp.CallToolResult{Meta: meta, IsError: isError}
	if len(upMeta) > 0 {
		merged, ok := mergeMeta(upMeta, meta)
		if !ok {
			return nil, false
		}
		res.Meta = merged
	}
	tc := &mcp.TextContent{}
	if len(text) > 0 {
		tc.Text = sp.SetText(text)
	}
	if structured != nil {
		// Valid JSON: Members checked the syntax of every value.
		res.StructuredContent, _ = sp.SetStructured(structured)
	}
	res.Content = []mcp.Content{tc}
	sp.SetPlain()
	return res, true
}

// upstreamText is the text of content, an upstream result's content array
// (checked by Members), when that holds exactly one item with the members
// type ("text") and text alone: its bytes as the SDK would decode them
// (non-nil, possibly empty).
func upstreamText(content []byte) ([]byte, bool) {
	t := bytes.TrimSpace(content)
	if len(t) < 2 || t[0] != '[' || t[len(t)-1] != ']' {
		return nil, false
	}
	var buf [2]strictjson.Member
	ms, err := strictjson.Members(buf[:0], t[1:len(t)-1])
	if err != nil || len(ms) != 2 {
		return nil, false
	}
	var raw []byte
	isText := false
	for _, m := range ms {
		switch string(m.Name) {
		case "type":
			isText = string(m.Value) == `"text"`
		case "text":
			raw = m.Value
		}
	}
	if !isText {
		return nil, false
	}
	return strictjson.Unquote(raw)
}

// mergeMeta is an upstream result's _meta, raw, without the members
// droppedUpstreamMeta names, with meta's over it.
func mergeMeta(raw []byte, meta mcp.Meta) (mcp.Meta, bool) {
	var buf [8]strictjson.Member
	ms, err := strictjson.Members(buf[:0], raw)
	if err != nil {
		return nil, false
	}
	merged := make(mcp.Meta, len(ms)+len(meta))
	for _, m := range ms {
		k := string(m.Name)
		if droppedUpstreamMeta(k) {
			continue
		}
		var v any
		if json.Unmarshal(m.Value, &v) != nil {
			return nil, false
		}
		merged[k] = v
	}
	for k, v := range meta {
		merged[k] = v
	}
	return merged, true
}

// droppedUpstreamMeta tells the members of an upstream result's _meta that
// never reach the client: the gateway's own (dev.obol/*, which the
// gateway adds after) and the upstream hop's (io.modelcontextprotocol/*:
// its serverInfo is not this server's).
func droppedUpstreamMeta(name string) bool {
	return strings.HasPrefix(name, "dev.obol/") || strings.HasPrefix(name, "io.modelcontextprotocol/")
}

// upstreamResult renders the stored body of an upstream MCP tool's answer,
// when it is the upstream's CallToolResult, as that result: its content,
// structuredContent and _meta but for the gateway's own dev.obol/*
// members, which an upstream cannot set, and the protocol's
// io.modelcontextprotocol/* members, which describe the upstream's hop (its
// serverInfo is not this server's); meta's then. isError is the
// call's: true unless accepted. ok is false for any other body (a JSON-RPC
// error object, an HTTP error's body), which renders as a vendor's body.
// structuredContent is the upstream's JSON as sent (compacted by the
// encoder), never decoded: a large integer keeps its digits.
func upstreamResult(body []byte, meta mcp.Meta, isError bool) (*mcp.CallToolResult, bool) {
	var probe struct {
		Content           json.RawMessage `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &probe) != nil || len(probe.Content) == 0 || probe.Content[0] != '[' {
		return nil, false
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, false
	}
	merged := mcp.Meta{}
	for k, v := range res.Meta {
		if !droppedUpstreamMeta(k) {
			merged[k] = v
		}
	}
	for k, v := range meta {
		merged[k] = v
	}
	res.Meta, res.IsError = merged, isError
	if len(probe.StructuredContent) > 0 && string(probe.StructuredContent) != "null" {
		// As the upstream sent it, not through float64.
		res.StructuredContent = probe.StructuredContent
	}
	return &res, true
}
