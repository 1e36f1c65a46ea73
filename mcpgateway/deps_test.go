package mcpgateway

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// forbiddenModules are what a consumer of the core and this package must not
// pull in: refserver's metrics and tracing SDKs, and the test-only tools.
var forbiddenModules = []string{
	"github.com/prometheus/",
	"go.opentelemetry.io/",
	"github.com/anishathalye/porcupine",
	"github.com/redis/go-redis",
	"github.com/gowebpki/jcs",
}

// TestConsumerPullsNoSDK builds the dependency list of a fresh module that
// imports only this package, its admin API and the core (replace-d to this checkout),
// offline, and fails on any module of forbiddenModules. It uses go list -deps
// with -mod=mod rather than go mod tidy: tidy also resolves the tests of every
// dependency (the go-sdk's import golang.org/x/tools and a JWT module), which
// no build of the consumer compiles and which an offline module cache need
// not hold; go list -deps resolves exactly the packages a build compiles, and
// -mod=mod writes the go.mod requirements they need, which the test reads too.
func TestConsumerPullsNoSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/consumer\n\ngo 1.26.0\n\nrequire github.com/obol-gateway/obol v0.0.0\n\nreplace github.com/obol-gateway/obol => "+repo+"\n")
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", string(sum))
	write("main.go", `package main

import (
	_ "github.com/obol-gateway/obol/broker"
	_ "github.com/obol-gateway/obol/broker/composio"
	_ "github.com/obol-gateway/obol/broker/nango"
	_ "github.com/obol-gateway/obol/effectspec"
	_ "github.com/obol-gateway/obol/idempotency"
	_ "github.com/obol-gateway/obol/idempotency/redisstore"
	_ "github.com/obol-gateway/obol/mcpgateway"
	_ "github.com/obol-gateway/obol/mcpgateway/admin"
	_ "github.com/obol-gateway/obol/mcpgateway/admin/operator"
	_ "github.com/obol-gateway/obol/mcpgateway/gatewayconfig"
	_ "github.com/obol-gateway/obol/receipt"
	_ "github.com/obol-gateway/obol/retry"
)

func main() {}
`)
	cmd := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	mods := strings.Fields(string(out))
	if !strings.Contains(string(out), "github.com/modelcontextprotocol/go-sdk") {
		t.Fatalf("the list lacks the go-sdk, which mcpgateway imports: %v", mods)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range forbiddenModules {
		for _, m := range mods {
			if strings.HasPrefix(m, bad) {
				t.Errorf("a consumer of the core, mcpgateway and mcpgateway/admin compiles %s", m)
			}
		}
		if strings.Contains(string(gomod), bad) {
			t.Errorf("the consumer's go.mod requires %s:\n%s", bad, gomod)
		}
	}
}
