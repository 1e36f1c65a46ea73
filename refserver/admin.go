package main

import (
	"context"
	"net/http"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/mcpgateway/admin"
)

// adminHandler is the admin API (mcpgateway/admin: the /v1 endpoints and
// /healthz) over the server's store, configuration, log and metrics.
func (s *server) adminHandler() http.Handler {
	h, err := admin.New(admin.Config{
		Store:      s.store,
		Approver:   s.cfg.Approver,
		Workspace:  s.cfg.Workspace,
		Workspaces: s.cfg.Workspaces,
		Scope:      s.scope,
		Providers: func(name string) ([]string, bool) {
			if c := s.cfg.Capabilities[name]; c != nil {
				return c.Providers, true
			}
			return nil, false
		},
		SetPin:       s.setPin,
		Import:       s.adminImport(),
		Classify:     s.gw.Classify,
		Redact:       s.redact.StringFold,
		Logger:       s.log,
		OnRefusal:    s.metrics.Refusal,
		OnStoreError: s.metrics.StoreError,
		OnSettle:     func(o effectspec.Outcome) { s.metrics.Settlement(string(o)) },
		StoreTimeout: s.storeTimeout,
		Durability:   s.durability,
	})
	if err != nil {
		panic("refserver: " + err.Error()) // Store and Approver are always set
	}
	return h
}

// scope is the scope of a call to a configured tool or capability.
func (s *server) scope(workspace, name string) (idempotency.Scope, bool) {
	sc := idempotency.Scope{Workspace: workspace, Tool: name}
	if t := s.cfg.Tools[name]; t != nil {
		sc.Connection = t.Connection
	}
	return sc, s.known(name)
}

// setPin moves a capability to provider, in the store first: a pin that
// only this process knew would route new calls here differently from the
// other gateways. Keys claimed before keep their route: only an unknown
// call (or one whose attempt never left) whose route now differs is a
// destination_conflict, never a redispatch to the new provider
// (docs/DESIGN.md, "Scope and the Redis key").
func (s *server) setPin(ctx context.Context, name, provider string) (string, error) {
	prev := s.pin(name)
	if s.pinned != nil {
		stored, err := s.pinned.SetPin(ctx, name, provider)
		if err != nil {
			return "", err
		}
		prev = stored
		if prev == "" {
			prev = s.cfg.Capabilities[name].Pin // nothing stored: the configured pin was in effect
		}
	}
	s.setLocalPin(name, provider)
	return prev, nil
}

// adminImport is admin.Config.Import: nil without an upstream MCP server.
func (s *server) adminImport() func(context.Context) error {
	if !s.hasUpstreams() {
		return nil
	}
	return s.gw.Import
}
