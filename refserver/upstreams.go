package main

import (
	"context"
	"strings"
	"time"
)

// Bounds of reading the upstream MCP servers' tools (docs/DESIGN.md, "MCP
// upstreams"): the first import at start, then a backoff from
// importRetryMin doubling to importRetryMax between background retries.
const (
	importTimeout  = 10 * time.Second
	importRetryMin = time.Second
	importRetryMax = time.Minute
)

// hasUpstreams reports whether a tool calls an upstream MCP server.
func (s *server) hasUpstreams() bool {
	for _, t := range s.cfg.Tools {
		if t.Upstream != nil {
			return true
		}
	}
	return false
}

// importTools reads every upstream's tools once, bounded by importTimeout.
func (s *server) importTools(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, importTimeout)
	defer cancel()
	err := s.gw.Import(ctx)
	if err != nil {
		s.log.Warn("upstream MCP tools not imported", "error", s.redact.String(strings.ReplaceAll(err.Error(), "\n", "; ")))
	} else {
		s.log.Info("upstream MCP tools imported")
	}
	return err
}

// startImport imports the upstreams' tools before the gateway serves; if
// an upstream cannot be read, it retries in the background until every one
// was read or ctx ends. Until then such an upstream's tools without a
// configured input_schema answer vendor_unreachable. done is closed when
// no more import runs in the background.
func (s *server) startImport(ctx context.Context) (done <-chan struct{}) {
	c := make(chan struct{})
	if !s.hasUpstreams() || s.importTools(ctx) == nil {
		close(c)
		return c
	}
	go func() {
		defer close(c)
		wait := importRetryMin
		for {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if s.importTools(ctx) == nil {
				return
			}
			wait = min(2*wait, importRetryMax)
		}
	}()
	return c
}
