package main

import (
	"os"
	"testing"

	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/retry"
)

// TestDemoAndExampleQuotas: the demo and the example set quotas on every
// workspace.
func TestDemoAndExampleQuotas(t *testing.T) {
	v, err := startDemoVendor()
	if err != nil {
		t.Fatal(err)
	}
	defer v.close(t.Context())
	demo, err := v.config(&retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	data, fc := readExampleConfig(t)
	setExampleSecrets(t, fc, e2eSecret)
	example, err := loadConfig(replacePlaceholders(data), os.LookupEnv, &retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*config{"demo": demo, "example": example} {
		gc := c.Gateway()
		for _, ws := range c.Workspaces {
			q := gc.Quotas[ws]
			if q.CallsPerSecond <= 0 || q.Burst <= 0 || q.InFlight <= 0 {
				t.Errorf("%s: %s has quota %+v", name, ws, q)
			}
		}
		if gc.StoreFullFraction != mcpgateway.DefaultStoreFullFraction {
			t.Errorf("%s: store_full_fraction %v", name, gc.StoreFullFraction)
		}
	}
}
