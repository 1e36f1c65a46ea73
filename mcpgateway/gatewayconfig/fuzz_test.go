package gatewayconfig

import (
	"os"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/internal/strictjson"
	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/retry"
)

// FuzzLoadConfig checks that loading never panics and that no error shows a
// secret value.
func FuzzLoadConfig(f *testing.F) {
	f.Add([]byte(goodConfig))
	if demo, err := os.ReadFile("../../refserver/demo.json"); err == nil {
		f.Add(demo) // the reference server's demo configuration
	}
	f.Add([]byte(`{"tools": [{"broker": "nango", "spec": {"tool": "x", "route": "federated"}}]}`))
	f.Add([]byte(`{"workspaces": [{"id": "w", "api_keys": ["` + testSecret + `"]}], "tools": [1]}`))
	f.Add([]byte(strings.Replace(goodConfig, `"workspaces"`, `"WORKSPACES": [], "workspaces"`, 1)))
	f.Add([]byte(strings.Replace(goodConfig, `"lease"`, `"le\u0061se": "1h", "lease"`, 1)))
	f.Add([]byte(strings.Replace(goodConfig, `"path": "/v1/charges",`, `"path": "/v1/charges", "input_schema": {"type": "object",
	  "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"type": "integer", "default": 1}}, "properties": {"a": {"$ref": "#/$defs/a"},
	  "s": {"type": "string", "pattern": "^x+$", "format": "email"}, "d": {"$dynamicRef": "#x"}}, "required": ["a"]},`, 1)))
	f.Add([]byte(strings.Replace(goodConfig, `"pin": "open.send2"`, `"pin": "open.send2", "input_schema": {"type": "object", "allOf": [true, {"not": false}]}`, 1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := loadConfig(data, testEnv, &retry.Executor{})
		if err == nil {
			// Whatever loads has one reading: no repeated member anywhere.
			if cerr := strictjson.Check(data); cerr != nil {
				t.Fatalf("loaded a document strictjson refuses: %v", cerr)
			}
		}
		if err != nil {
			if c != nil {
				t.Fatal("a config and an error")
			}
			if strings.Contains(err.Error(), testSecret+"_") {
				t.Fatalf("error shows a secret: %v", err)
			}
			return
		}
		for _, name := range c.ToolOrder {
			if c.Tools[name] == nil && c.Capabilities[name] == nil {
				t.Fatalf("tool %s in the order but not configured", name)
			}
			if tl := c.Tools[name]; tl != nil {
				tl.InputSchema.Check([]byte(`{"a": 1, "s": "x", "d": [null, {}]}`))
			} else {
				c.Capabilities[name].InputSchema.Check([]byte(`{}`))
			}
		}
		// Whatever loads can be served: the SDK panics on a tool it
		// cannot list.
		gc := c.Gateway()
		gc.Orchestrator = &retry.Orchestrator{}
		if _, err := mcpgateway.New(gc); err != nil {
			t.Fatalf("loaded a config the gateway refuses: %v", err)
		}
	})
}
