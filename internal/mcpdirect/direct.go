package mcpdirect

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/internal/jsonwire"
)

// newProtocol is the first protocol version whose requests the SDK serves
// without the old session model (SEP-2575): those go to the SDK.
const newProtocol = "2026-07-28"

// directVersions are the MCP-Protocol-Version values the direct path
// serves: the SDK's, before newProtocol. An absent header is served too.
func directVersions() []string {
	return slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(v string) bool { return v >= newProtocol })
}

// legacySessions reports the SDK's compatibility switch under which a
// stateless server reads Mcp-Session-Id: the direct path then stays off.
func legacySessions() bool {
	for _, kv := range strings.Split(os.Getenv("MCPGODEBUG"), ",") {
		if strings.TrimSpace(kv) == "allowsessionsinstateless=1" {
			return true
		}
	}
	return false
}

// A Server answers a tools/call as the SDK's stateless JSON handler would,
// byte for byte, without the SDK: see [Server.Serve].
type Server struct {
	run      RunFunc
	extraKey string
	versions []string // the MCP-Protocol-Version values served
	off      bool     // the SDK reads sessions (legacySessions): serve nothing
	// OnServe, if set, is called for each call Serve answers (tests count
	// them).
	OnServe func()
}

// A RunFunc runs one tools/call as the tool handler the SDK would call:
// its result or error, whether the result has the shape the answer can
// be written without reflection (see appendPlainResult), and observe,
// which Serve's caller runs once the answer has left (the call's log line
// and the end of its hooks).
type RunFunc func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, plain bool, observe func(), err error)

// New returns a Server whose calls run. Each request's TokenInfo.Extra
// holds [Request.Call] under extraKey, where the SDK's auth middleware
// would have put it.
func New(run RunFunc, extraKey string) *Server {
	return &Server{run: run, extraKey: extraKey, versions: directVersions(), off: legacySessions()}
}

// A Request is a tools/call message as the front read it, strictly.
type Request struct {
	ID        json.RawMessage // the JSON-RPC id as sent: a string or an integer below 2^53
	Name      string          // params.name
	Meta      json.RawMessage // params._meta as sent, nil when absent
	Arguments json.RawMessage // params.arguments as sent, nil when absent
	Workspace string          // the caller's, as TokenInfo.UserID
	Call      any             // TokenInfo.Extra[extraKey]
}

// Serve answers req as the SDK's handler would, and reports whether it did;
// false means nothing was written and the request goes to the SDK (a
// request whose headers or protocol version the SDK treats otherwise, a
// _meta or id it reads otherwise). When it did, observe is the call's
// (see [RunFunc]): the caller runs it after the answer has left.
func (s *Server) Serve(w http.ResponseWriter, r *http.Request, req Request) (served bool, observe func()) {
	if !s.accepts(r) {
		return false, nil
	}
	var meta mcp.Meta
	if len(req.Meta) > 0 && json.Unmarshal(req.Meta, &meta) != nil {
		return false, nil
	}
	rid, intID, ok := directID(req.ID)
	if !ok {
		return false, nil
	}
	creq := &mcp.CallToolRequest{
		Params: &mcp.CallToolParamsRaw{Meta: meta, Name: req.Name, Arguments: req.Arguments},
		Extra: &mcp.RequestExtra{
			TokenInfo: &auth.TokenInfo{UserID: req.Workspace, Extra: map[string]any{s.extraKey: req.Call}},
			Header:    r.Header,
		},
	}
	if s.OnServe != nil {
		s.OnServe()
	}
	res, plain, observe, cerr := s.run(r.Context(), creq)
	data, err := directAnswer(rid, intID, res, cerr, plain)
	if err != nil {
		// Unreachable for what the tool handler returns; the SDK answers
		// an encoding failure as a transport error, which the front
		// rewrites.
		http.Error(w, "internal error", http.StatusInternalServerError)
		return true, observe
	}
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(data)
	return true, observe
}

// directAnswer is the SDK's JSON-RPC answer to a call that returned res or
// cerr. For an integer id (intID) it writes the envelope itself, as
// jsonrpc2.EncodeMessage does (whose re-encoding of the compact result
// changes nothing), and a plain result (see [RunFunc]: appendPlainResult)
// without reflection.
func directAnswer(rid jsonrpc.ID, intID []byte, res *mcp.CallToolResult, cerr error, plain bool) ([]byte, error) {
	if cerr == nil {
		if res.Content == nil {
			// As the SDK's Server.callTool: never "content": null.
			res.Content = []mcp.Content{}
		}
		var data []byte
		if intID != nil {
			data = append(append(append(make([]byte, 0, 512), `{"jsonrpc":"2.0","id":`...), intID...), `,"result":`...)
			if plain {
				if out, ok := appendPlainResult(data, res); ok {
					return append(out, '}'), nil
				}
			}
		}
		result, err := encodeResult(res)
		switch {
		case err != nil:
			cerr = err
		case intID != nil:
			return append(append(data, result...), '}'), nil
		default:
			return jsonrpc.EncodeMessage(&jsonrpc.Response{ID: rid, Result: result})
		}
	}
	return jsonrpc.EncodeMessage(&jsonrpc.Response{ID: rid, Error: cerr})
}

// appendPlainResult appends res to dst as encodeResult writes it, for the
// shape the gateway's own results have: _meta of string values, one text
// content without _meta or annotations, a structuredContent that is JSON needing no
// compaction or escape, isError, and nothing else (the SDK's
// CallToolResult and TextContent encodings: keys in that order, _meta's
// sorted, strings as encoding/json escapes them). ok is false for any
// other result, which encodeResult writes; TestPlainResult and the direct
// path's differential tests hold the two equal.
func appendPlainResult(dst []byte, res *mcp.CallToolResult) (_ []byte, ok bool) {
	if len(res.Content) != 1 || res.InputRequests != nil || res.RequestState != "" || res.NeedsInput() {
		return nil, false
	}
	tc, isText := res.Content[0].(*mcp.TextContent)
	if !isText || tc.Meta != nil || tc.Annotations != nil {
		return nil, false
	}
	var structured json.RawMessage
	switch v := res.StructuredContent.(type) {
	case nil:
	case json.RawMessage:
		if len(v) == 0 || !plainJSON(v) {
			return nil, false
		}
		structured = v
	default:
		return nil, false
	}
	if len(res.Meta) > 0 {
		keys := make([]string, 0, 4)
		for k, v := range res.Meta {
			if _, isStr := v.(string); !isStr {
				return nil, false
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, `{"_meta":{`...)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonwire.AppendString(dst, k)
			dst = append(dst, ':')
			dst = jsonwire.AppendString(dst, res.Meta[k].(string))
		}
		dst = append(dst, `},"content":[{"type":"text","text":`...)
	} else {
		dst = append(dst, `{"content":[{"type":"text","text":`...)
	}
	dst = jsonwire.AppendString(dst, tc.Text)
	dst = append(dst, "}]"...)
	if structured != nil {
		dst = append(append(dst, `,"structuredContent":`...), structured...)
	}
	if res.IsError {
		dst = append(dst, `,"isError":true`...)
	}
	return append(dst, '}'), true
}

// plainJSON reports whether b is written as it is by encoding/json, which
// compacts a json.RawMessage and escapes <, > and & in it: valid JSON of
// printable ASCII without spaces or those three.
func plainJSON(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return json.Valid(b)
}

// directID is the id the SDK answers a request's id with: a number becomes
// a float64, which jsonrpc.MakeID turns into an integer id (the front admits
// only integers below 2^53 and strings). For an integer, intID is how the
// SDK writes it back: the integer in decimal ("-0" is 0).
func directID(raw json.RawMessage) (rid jsonrpc.ID, intID []byte, ok bool) {
	if len(raw) > 0 && raw[0] != '"' {
		if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil && n > -(1<<53) && n < 1<<53 {
			rid, err := jsonrpc.MakeID(float64(n))
			return rid, strconv.AppendInt(nil, n, 10), err == nil
		}
	}
	var id any
	if json.Unmarshal(raw, &id) != nil {
		return jsonrpc.ID{}, nil, false
	}
	rid, err := jsonrpc.MakeID(id)
	return rid, nil, err == nil
}

// encodeResult encodes res as the SDK's JSON-RPC layer does: encoding/json
// without HTML escaping, no trailing newline.
func encodeResult(res *mcp.CallToolResult) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// accepts reports whether the SDK would pass r's headers on to the tool
// handler: its DNS-rebinding check, protocol version, Content-Type and
// Accept checks, repeated here; a request they would refuse or route
// otherwise goes to the SDK, which answers it.
func (s *Server) accepts(r *http.Request) bool {
	if s.off {
		return false
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil && loopback(la.String()) && !loopback(r.Host) {
		return false
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && !slices.Contains(s.versions, v) {
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	jsonOK, streamOK := false, false
	for _, v := range r.Header.Values("Accept") {
		for _, raw := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}

// loopback is the SDK's test of a loopback address or Host: "localhost",
// or a loopback IP, with or without a port.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
