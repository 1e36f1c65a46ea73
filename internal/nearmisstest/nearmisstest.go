// Package nearmisstest reads the near-miss key name vectors that
// docs/DESIGN.md publishes (section "refserver wire contract"), for the
// tests of the front and of the built reference server: the document and
// the tests cannot drift apart.
package nearmisstest

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// Vector is one row of the published vectors: where the name goes, the
// name as a JSON string literal (escapes as written), its unescaped text
// and its verdict.
type Vector struct {
	Where   string // "_meta", "params" or "header"
	Raw     string
	Name    string
	Refused bool
}

// Vectors reads the vectors of the DESIGN document at path. A table that
// no longer parses fails t rather than passing as an empty one.
func Vectors(t testing.TB, path string) []Vector {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var vs []Vector
	count := map[string]int{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) != 5 || cells[0] != "" || cells[4] != "" {
			continue
		}
		where := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if where != "_meta" && where != "params" && where != "header" {
			continue
		}
		v := Vector{Where: where, Raw: strings.Trim(strings.TrimSpace(cells[2]), "`")}
		if err := json.Unmarshal([]byte(v.Raw), &v.Name); err != nil {
			t.Fatalf("vector %s: %v", v.Raw, err)
		}
		switch verdict := strings.TrimSpace(cells[3]); {
		case strings.HasPrefix(verdict, "refused"):
			v.Refused = true
		case !strings.HasPrefix(verdict, "accepted"):
			t.Fatalf("vector %s: verdict %q", v.Raw, verdict)
		}
		vs = append(vs, v)
		count[fmt.Sprintf("%s %v", where, v.Refused)]++
	}
	for _, k := range []string{"_meta true", "_meta false", "params true", "header true", "header false"} {
		if count[k] < 2 {
			t.Fatalf("DESIGN.md has %d near-miss vectors for %q; the table did not parse", count[k], k)
		}
	}
	return vs
}

// Body is a tools/call of tool (or, when tool is "", a tools/list) that
// carries v with key as its value (ticket instead when v names the ticket
// member ticketName); metaKey is the key's member name.
func Body(v Vector, tool, key, ticket, metaKey, ticketName string) string {
	params := ``
	switch v.Where {
	case "_meta":
		val := `"` + key + `"`
		if v.Name == ticketName {
			val = `"` + ticket + `"`
		}
		params = `"_meta":{` + v.Raw + `:` + val + `}`
	case "params":
		params = v.Raw + `:{"` + metaKey + `":"` + key + `"}`
	}
	if tool == "" {
		if params == "" {
			return `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
		}
		return `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{` + params + `}}`
	}
	if params != "" {
		params = "," + params
	}
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"amount":1}` + params + `}}`
}
