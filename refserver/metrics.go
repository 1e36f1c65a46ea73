package main

import "github.com/obol-gateway/obol/mcpgateway/promhooks"

// metrics are the server's Prometheus metrics (promhooks), with the counters
// the admin endpoints count with.
type metrics struct {
	*promhooks.Metrics
	refusals, storeErrors, settlements labeled
	// frontLog rate-limits the log lines of front-door refusals.
	frontLog frontLog
}

func newMetrics() *metrics {
	m := promhooks.New()
	return &metrics{Metrics: m, refusals: m.Refusal, storeErrors: m.StoreError, settlements: m.Settlement}
}

// setDataLost makes obol_store_data_lost report lost().
func (m *metrics) setDataLost(lost func() bool) { m.SetDataLost(lost) }

// labeled is a counter by one label: labeled(f).WithLabelValues(v).Inc() is
// f(v).
type labeled func(string)

func (f labeled) WithLabelValues(v string) counted { return func() { f(v) } }

type counted func()

func (f counted) Inc() { f() }

// operatorMetrics registers obol_unknown_calls, read from the store when it
// counts them, and the operator series at zero (WatchUnknown).
func (s *server) operatorMetrics() {
	c, _ := s.store.(promhooks.UnknownCounter)
	s.metrics.WatchUnknown(s.cfg.Workspaces, c, s.log)
}
