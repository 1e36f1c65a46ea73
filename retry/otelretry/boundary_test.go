package otelretry_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreFreeOfOpenTelemetry: the core packages build without
// OpenTelemetry; only this adapter (and the reference server) import it.
func TestCoreFreeOfOpenTelemetry(t *testing.T) {
	core := []string{"effectspec", "idempotency", "idempotency/redisstore", "receipt", "retry", "broker"}
	for _, pkg := range core {
		out, err := exec.Command("go", "list", "-deps", "github.com/obol-gateway/obol/"+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "go.opentelemetry.io/") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
