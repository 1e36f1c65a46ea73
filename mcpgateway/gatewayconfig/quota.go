package gatewayconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/obol-gateway/obol/mcpgateway"
)

// quotaConfig is a quota object of the file: default_quota, or a
// workspace's quota. A member a workspace's quota leaves out is
// default_quota's; 0 is unlimited.
type quotaConfig struct {
	CallsPerSecond *float64 `json:"calls_per_second"`
	Burst          *int     `json:"burst"`
	StoredBytes    *int64   `json:"stored_bytes"`
	InFlight       *int     `json:"in_flight"`
}

// quotaSettings are the quota settings of a configuration (default_quota,
// every workspace's quota, store_full_fraction), as [mcpgateway.Config]
// takes them: each quota an [mcpgateway.WorkspaceQuota].
type quotaSettings struct {
	Default mcpgateway.WorkspaceQuota
	// Workspaces holds every configured workspace's quota (its own
	// members over default_quota's).
	Workspaces map[string]mcpgateway.WorkspaceQuota
	// StoreFullFraction is 0 for mcpgateway's default.
	StoreFullFraction float64
}

// Bounds of a quota's members: beyond them a value is a typing slip.
const (
	maxQuotaRate  = 1e6
	maxQuotaCount = 1 << 20
)

// parseQuotas reads default_quota (raw, nil when absent), each
// workspace's quota (quotas[i] of workspace ids[i], nil when absent) and
// store_full_fraction (nil when absent). It returns the typed values and
// every problem, each naming its field path and never a value.
func parseQuotas(defaultQuota json.RawMessage, storeFullFraction *float64, ids []string, quotas []json.RawMessage) (quotaSettings, []string) {
	var problems []string
	s := quotaSettings{Workspaces: map[string]mcpgateway.WorkspaceQuota{}}
	s.Default = parseQuota("default_quota", defaultQuota, mcpgateway.WorkspaceQuota{}, &problems)
	for i, id := range ids {
		var raw json.RawMessage
		if i < len(quotas) {
			raw = quotas[i]
		}
		s.Workspaces[id] = parseQuota(fmt.Sprintf("workspaces[%d].quota", i), raw, s.Default, &problems)
	}
	if f := storeFullFraction; f != nil {
		if !(*f > 0 && *f <= 1) {
			problems = append(problems, fmt.Sprintf("store_full_fraction: must be above 0 and at most 1 (default %g)", mcpgateway.DefaultStoreFullFraction))
		} else {
			s.StoreFullFraction = *f
		}
	}
	return s, problems
}

// parseQuota reads one quota object at where over base.
func parseQuota(where string, raw json.RawMessage, base mcpgateway.WorkspaceQuota, problems *[]string) mcpgateway.WorkspaceQuota {
	bad := func(format string, args ...any) { *problems = append(*problems, where+fmt.Sprintf(format, args...)) }
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return base
	} else if t[0] != '{' {
		bad(`: must be an object {"calls_per_second": N, "burst": N, "stored_bytes": N, "in_flight": N}`)
		return base
	}
	var qc quotaConfig
	if err := decodeStrict(raw, &qc); err != nil {
		bad(": %s", err)
		return base
	}
	q := base
	if v := qc.CallsPerSecond; v != nil {
		if *v < 0 || *v > maxQuotaRate || math.IsNaN(*v) {
			bad(".calls_per_second: must be 0 (unlimited) to %g", float64(maxQuotaRate))
		} else {
			q.CallsPerSecond = *v
			if qc.Burst == nil {
				q.Burst = 0 // the rate's own, not base's
			}
		}
	}
	if v := qc.Burst; v != nil {
		if *v < 0 || *v > maxQuotaCount {
			bad(".burst: must be 0 (calls_per_second rounded up) to %d", maxQuotaCount)
		} else {
			q.Burst = *v
		}
	}
	if v := qc.StoredBytes; v != nil {
		if *v < 0 {
			bad(".stored_bytes: must be 0 (unlimited) or more")
		} else {
			q.StoredBytes = *v
		}
	}
	if v := qc.InFlight; v != nil {
		if *v < 0 || *v > maxQuotaCount {
			bad(".in_flight: must be 0 (unlimited) to %d", maxQuotaCount)
		} else {
			q.InFlight = *v
		}
	}
	if q.Burst > 0 && q.CallsPerSecond == 0 {
		bad(".burst: needs calls_per_second")
	}
	return q
}

// workspaceQuotas is each workspace's quota, as written.
func workspaceQuotas(ws []workspaceEntry) []json.RawMessage {
	raw := make([]json.RawMessage, len(ws))
	for i := range ws {
		raw[i] = ws[i].Quota
	}
	return raw
}

// quotaFlush is how often a store flushes the bytes it counted, when a
// workspace has a stored_bytes quota: with the gateways' 500 ms reading, the
// lag of that limit.
const quotaFlush = 250 * time.Millisecond

// accountBytes is redisstore.Options.AccountBytes for s: counted only when
// some workspace limits its stored bytes.
func (s quotaSettings) accountBytes() time.Duration {
	for _, q := range s.Workspaces {
		if q.StoredBytes > 0 {
			return quotaFlush
		}
	}
	if s.Default.StoredBytes > 0 {
		return quotaFlush
	}
	return 0
}
