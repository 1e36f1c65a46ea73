package redisstore

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/internal/scriptargs"
)

// luaToken is an identifier of a Lua chunk, outside comments and string
// literals; field says it follows a '.' or ':' (a field or method name).
type luaToken struct {
	name  string
	field bool
	line  int
}

// luaTokens scans the identifiers of src: enough Lua to tell a script's
// locals from its comments, strings and table fields.
func luaTokens(src string) []luaToken {
	var out []luaToken
	line := 1
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
		case strings.HasPrefix(src[i:], "--"):
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '\'' || c == '"':
			i++
			for i < len(src) && src[i] != c {
				if src[i] == '\\' {
					i++
				}
				i++
			}
			i++
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			k := i - 1
			for k >= 0 && (src[k] == ' ' || src[k] == '\t') {
				k--
			}
			field := k >= 0 && (src[k] == '.' || src[k] == ':') && !(k > 0 && src[k-1] == '.')
			out = append(out, luaToken{src[i:j], field, line})
			i = j
		default:
			i++
		}
	}
	return out
}

// declared returns the names that the chunk declares (local names, local
// functions, function parameters, for variables), each with its line.
func declared(src string) map[string]int {
	out := map[string]int{}
	for _, l := range strings.Split(src, "\n") {
		l, _, _ = strings.Cut(l, "--")
		for _, part := range strings.Split(l, "local ")[1:] {
			part = strings.TrimPrefix(strings.TrimSpace(part), "function ")
			names, _, _ := strings.Cut(part, "=")
			names, _, _ = strings.Cut(names, "(")
			for _, n := range strings.Split(names, ",") {
				out[strings.TrimSpace(n)]++
			}
		}
		for _, kw := range []string{"function", "for "} {
			for _, part := range strings.Split(l, kw)[1:] {
				var names string
				if kw == "function" {
					_, after, ok := strings.Cut(part, "(")
					if !ok {
						continue
					}
					names, _, _ = strings.Cut(after, ")")
				} else {
					names, _, _ = strings.Cut(part, " in ")
					names, _, _ = strings.Cut(names, "=")
				}
				for _, n := range strings.Split(names, ",") {
					out[strings.TrimSpace(n)]++
				}
			}
		}
	}
	return out
}

// TestScriptsReadArgumentsByName: the Lua side and the Go side of every
// script's arguments are the one list of internal/scriptargs. Each script
// body reads no ARGV by position, uses every argument the list names, and
// declares none of them again (which would hide it); lua/common.lua reads
// ARGV only in set_result (a script's remaining arguments) and declares no
// name an argument has.
func TestScriptsReadArgumentsByName(t *testing.T) {
	common, err := luaFS.ReadFile("lua/common.lua")
	if err != nil {
		t.Fatal(err)
	}
	fn, rest, _ := strings.Cut(string(common), "local function set_result(")
	if !strings.HasPrefix(rest, "r, i)\n") {
		t.Fatalf("common.lua: set_result(r, i) not found")
	}
	_, after, _ := strings.Cut(rest, "\nend\n")
	for _, tok := range luaTokens(fn + after) {
		if tok.name == "ARGV" {
			t.Errorf("common.lua:%d: ARGV outside set_result", tok.line)
		}
	}
	// The prologue follows common.lua: an argument named as one of its
	// top-level locals would hide it from the script.
	commonNames := map[string]int{}
	for _, l := range strings.Split(string(common), "\n") {
		if l, ok := strings.CutPrefix(l, "local "); ok {
			names, _, _ := strings.Cut(strings.TrimPrefix(l, "function "), "=")
			names, _, _ = strings.Cut(names, "(")
			for _, n := range strings.Split(names, ",") {
				commonNames[strings.TrimSpace(n)]++
			}
		}
	}
	if commonNames["key"] == 0 || commonNames["set_result"] == 0 {
		t.Fatalf("common.lua's top-level locals not found: %v", commonNames)
	}

	files, err := luaFS.ReadDir("lua")
	if err != nil {
		t.Fatal(err)
	}
	var scripts []string
	for _, f := range files {
		if name := strings.TrimSuffix(f.Name(), ".lua"); name != "common" {
			scripts = append(scripts, name)
		}
	}
	var infos []string
	for _, s := range Scripts() {
		infos = append(infos, s.Name)
	}
	slices.Sort(infos)
	if !slices.Equal(scripts, infos) {
		t.Fatalf("lua/ holds %v, Scripts lists %v", scripts, infos)
	}
	for _, name := range scripts {
		args := scriptargs.Of(name)
		if args == nil {
			t.Errorf("%s: no arguments in internal/scriptargs", name)
			continue
		}
		body, err := luaFS.ReadFile("lua/" + name + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		used := map[string]bool{}
		for _, tok := range luaTokens(string(body)) {
			if tok.name == "ARGV" {
				t.Errorf("%s.lua:%d: reads ARGV by position; name the argument in its internal/scriptargs struct", name, tok.line)
			}
			if !tok.field {
				used[tok.name] = true
			}
		}
		decl := declared(string(body))
		if keys := args.Keys(); keys[len(keys)-1] == "gen" {
			used["gen"] = true // by gen_wrap, around the body (scriptSource)
		}
		for _, arg := range args.Names() {
			if !used[arg] {
				t.Errorf("%s.lua never uses its argument %s", name, arg)
			}
			if decl[arg] > 0 {
				t.Errorf("%s.lua declares %s again, which hides the argument", name, arg)
			}
			if commonNames[arg] > 0 {
				t.Errorf("common.lua declares %s, an argument of %s, which hides it", arg, name)
			}
		}
		if !strings.Contains(scriptSource(name, name == "index"), args.Prologue()) {
			t.Errorf("%s: the source sent lacks the prologue", name)
		}
	}
}

// TestTheScannerSeesArguments: the scanner of the test above finds a use,
// a position, a redeclaration, and skips comments, strings and fields.
func TestTheScannerSeesArguments(t *testing.T) {
	src := "-- ARGV[1] op\nlocal x = r.op .. 'op' .. ARGV[2]\nlocal function f(a, op) return sv end\n"
	var names []string
	for _, tok := range luaTokens(src) {
		if !tok.field {
			names = append(names, tok.name)
		}
	}
	if want := []string{"local", "x", "r", "ARGV", "local", "function", "f", "a", "op", "return", "sv", "end"}; !slices.Equal(names, want) {
		t.Fatalf("tokens %q, want %q", names, want)
	}
	if d := declared(src); d["x"] != 1 || d["f"] != 1 || d["op"] != 1 || d["a"] != 1 || d["sv"] != 0 {
		t.Fatalf("declared %v", d)
	}
}

// TestScriptRefusesAnotherLayout: a call made by hand with a count of
// arguments that is not the script's is an error, never a misread
// argument.
func TestScriptRefusesAnotherLayout(t *testing.T) {
	m := newMini(t, Options{})
	argv := scriptargs.RenewSpec.Argv(&scriptargs.Renew{Token: 1, Op: "op", Lease: "1000"})
	_, err := m.store.sc.renew.lua.Exec(context.Background(), m.client, []string{"k"}, argv[:3]).ToArray()
	if err == nil || !strings.Contains(err.Error(), "renew takes 4 arguments, got 3") {
		t.Fatalf("renew with 3 arguments: %v", err)
	}
	argv = scriptargs.FinalizeSpec.Argv(&scriptargs.Finalize{Token: 1, State: "a", Op: "op", TTL: "1000"})
	_, err = m.store.sc.finalize.lua.Exec(context.Background(), m.client, []string{"{k}", "{k}b"}, argv[:6]).ToArray()
	if err == nil || !strings.Contains(err.Error(), "finalize takes at least 7 arguments, got 6") {
		t.Fatalf("finalize with 6 arguments: %v", err)
	}
}
