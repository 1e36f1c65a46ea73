package main

import "github.com/obol-gateway/obol/mcpgateway/promhooks"

// metrics are the server's Prometheus metrics (promhooks).
type metrics struct {
	*promhooks.Metrics
	// frontLog rate-limits the log lines of front-door refusals.
	frontLog frontLog
}

func newMetrics() *metrics { return &metrics{Metrics: promhooks.New()} }

// setDataLost makes obol_store_data_lost report lost().
func (m *metrics) setDataLost(lost func() bool) { m.SetDataLost(lost) }

// operatorMetrics registers obol_unknown_calls, read from the store when it
// counts them, and the operator series at zero (WatchUnknown).
func (s *server) operatorMetrics() {
	c, _ := s.store.(promhooks.UnknownCounter)
	s.metrics.WatchUnknown(s.cfg.Workspaces, c, s.log)
}
