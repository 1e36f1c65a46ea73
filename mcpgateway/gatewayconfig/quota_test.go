package gatewayconfig

import (
	"strings"
	"testing"

	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/retry"
)

// withQuotas is goodConfig with default_quota def (if not empty), the
// second workspace's quota ws (if not empty) and extra top-level members.
func withQuotas(def, ws, extra string) []byte {
	c := goodConfig
	if def != "" {
		c = strings.Replace(c, `{`, `{"default_quota": `+def+`, `, 1)
	}
	if ws != "" {
		c = strings.Replace(c, `"api_keys": ["ob_live_globex"]`, `"api_keys": ["ob_live_globex"], "quota": `+ws, 1)
	}
	if extra != "" {
		c = strings.Replace(c, `{`, `{`+extra+`, `, 1)
	}
	return []byte(c)
}

// TestQuotaConfig: default_quota applies to every workspace, a
// workspace's quota overrides it member by member (0 is unlimited), and
// store_full_fraction is passed on; without them nothing is limited.
func TestQuotaConfig(t *testing.T) {
	c, err := loadConfig([]byte(goodConfig), testEnv, &retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	if c.quotas.Default != (mcpgateway.WorkspaceQuota{}) || c.quotas.Workspaces["ws_acme"] != (mcpgateway.WorkspaceQuota{}) || c.quotas.StoreFullFraction != 0 {
		t.Fatalf("quotas of a config without any: %+v", c.quotas)
	}
	c, err = loadConfig(withQuotas(`{"calls_per_second": 20, "burst": 40, "stored_bytes": 1000000, "in_flight": 8}`,
		`{"calls_per_second": 2.5, "in_flight": 0}`, `"store_full_fraction": 0.8`), testEnv, &retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	def := mcpgateway.WorkspaceQuota{CallsPerSecond: 20, Burst: 40, StoredBytes: 1000000, InFlight: 8}
	if c.quotas.Default != def || c.quotas.Workspaces["ws_acme"] != def {
		t.Fatalf("default: %+v", c.quotas)
	}
	// A rate of its own takes its own burst (its rate rounded up), not the
	// default's; stored_bytes is the default's; in_flight 0 is unlimited.
	if g := c.quotas.Workspaces["ws_globex"]; g != (mcpgateway.WorkspaceQuota{CallsPerSecond: 2.5, StoredBytes: 1000000}) {
		t.Fatalf("ws_globex: %+v", g)
	}
	if c.quotas.StoreFullFraction != 0.8 {
		t.Fatalf("store_full_fraction %v", c.quotas.StoreFullFraction)
	}
	// A stored_bytes limit makes the store count the bytes it writes; the
	// gateway's config carries every quota.
	if c.Store.AccountBytes == 0 {
		t.Fatal("stored_bytes quota set, but Store.AccountBytes is 0")
	}
	gc := c.Gateway()
	if gc.DefaultQuota != def || gc.Quotas["ws_globex"] != c.quotas.Workspaces["ws_globex"] || gc.StoreFullFraction != 0.8 {
		t.Fatalf("Gateway() quotas: %+v %+v %v", gc.DefaultQuota, gc.Quotas, gc.StoreFullFraction)
	}
}

// TestQuotaConfigRefused: a bad quota is refused by its field path,
// quoting no value, and loads nothing.
func TestQuotaConfigRefused(t *testing.T) {
	for _, tc := range []struct{ def, ws, extra, want string }{
		{def: `{"calls_per_second": -1}`, want: "default_quota.calls_per_second"},
		{def: `{"calls_per_second": 1e9}`, want: "default_quota.calls_per_second"},
		{def: `{"burst": 5}`, want: "default_quota.burst: needs calls_per_second"},
		{ws: `{"in_flight": -3}`, want: "workspaces[1].quota.in_flight"},
		{ws: `{"stored_bytes": -1}`, want: "workspaces[1].quota.stored_bytes"},
		{ws: `{"in_flight": 1.5}`, want: "workspaces[1].quota"},
		{ws: `{"calls_per_secnd": 5}`, want: "workspaces[1].quota"},
		{ws: `[5]`, want: "workspaces[1].quota: must be an object"},
		{def: `"fast"`, want: "default_quota: must be an object"},
		{extra: `"store_full_fraction": 0`, want: "store_full_fraction"},
		{extra: `"store_full_fraction": 1.2`, want: "store_full_fraction"},
	} {
		c, err := loadConfig(withQuotas(tc.def, tc.ws, tc.extra), testEnv, &retry.Executor{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || c != nil {
			t.Errorf("%s%s%s: err %v, want %q", tc.def, tc.ws, tc.extra, err, tc.want)
			continue
		}
		for _, v := range []string{"1e9", "fast", "1.2"} {
			if strings.Contains(tc.def+tc.ws+tc.extra, v) && strings.Contains(err.Error(), v) {
				t.Errorf("error quotes the value %s: %v", v, err)
			}
		}
	}
}
