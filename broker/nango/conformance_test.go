package nango_test

import (
	"testing"

	"github.com/obol-gateway/obol/broker"
	"github.com/obol-gateway/obol/broker/brokertest"
	"github.com/obol-gateway/obol/broker/nango"
)

func TestConformance(t *testing.T) {
	brokertest.Run(t, brokertest.Harness[nango.Config]{
		Kind:        nango.Kind,
		Config:      func(base, secret string) nango.Config { return nango.Config{BaseURL: base, Secret: secret} },
		New:         func(c nango.Config) (broker.Broker, error) { return nango.New(c) },
		SecretField: "Secret",
		Routings: []brokertest.Routing{
			{Name: "proxy", Fields: proxyRouting("PATCH", "/crm/v3/objects/contacts/9"), Path: "/proxy/crm/v3/objects/contacts/9"},
			{Name: "proxy default POST", Fields: proxyRouting("", "/crm/v3/objects/contacts"), Path: "/proxy/crm/v3/objects/contacts"},
			// The action name is in the body; the Route's path names it.
			{Name: "action", Fields: actionRouting("create-issue"), Path: "/action/trigger"},
			{Name: "other action", Fields: actionRouting("close-issue"), Path: "/action/trigger"},
		},
		BadRoutings: badRoutings,
		Reply:       func(data []byte) []byte { return data },
	})
}

// badRoutings are the routings Nango's adapter refuses, with the field named.
var badRoutings = []brokertest.BadRouting{
	{Name: "both path and action", Fields: map[string]string{"connection_id": "c", "provider_config_key": "p", "path": "/a", "action": "x"}, Field: "routing.action"},
	{Name: "nil", Fields: nil, Field: "routing.connection_id"},
	{Name: "no connection", Fields: map[string]string{"provider_config_key": "p", "path": "/a"}, Field: "routing.connection_id"},
	{Name: "no provider", Fields: map[string]string{"connection_id": "c", "path": "/a"}, Field: "routing.provider_config_key"},
	{Name: "header injection", Fields: map[string]string{"connection_id": "c\r\nX: y", "provider_config_key": "p", "path": "/a"}, Field: "routing.connection_id"},
	{Name: "neither path nor action", Fields: map[string]string{"connection_id": "c", "provider_config_key": "p"}, Field: "routing.path"},
	{Name: "method with action", Fields: map[string]string{"connection_id": "c", "provider_config_key": "p", "method": "GET", "action": "x"}, Field: "routing.method"},
	{Name: "empty action", Fields: actionRouting(""), Field: "routing.action"},
	{Name: "control char action", Fields: actionRouting("a\x00b"), Field: "routing.action"},
	{Name: "unknown field", Fields: map[string]string{"connection_id": "c", "provider_config_key": "p", "path": "/a", "retries": "3"}, Field: `routing."retries"`},
	{Name: "bad method", Fields: proxyRouting("TRACE", "/a"), Field: "routing.method"},
	{Name: "empty path", Fields: proxyRouting("POST", "/"), Field: "routing.path"},
	{Name: "query only", Fields: proxyRouting("POST", "/?a=1"), Field: "routing.path"},
	{Name: "dot dot", Fields: proxyRouting("POST", "/../connection/c"), Field: "routing.path"},
	{Name: "dot", Fields: proxyRouting("POST", "a/./b"), Field: "routing.path"},
	{Name: "encoded dot dot", Fields: proxyRouting("POST", "a/%2e%2E/b"), Field: "routing.path"},
	{Name: "encoded dot", Fields: proxyRouting("POST", "%2E/b"), Field: "routing.path"},
	{Name: "bad escape", Fields: proxyRouting("POST", "a/%zz"), Field: "routing.path"},
	{Name: "fragment", Fields: proxyRouting("POST", "a#b"), Field: "routing.path"},
	{Name: "space", Fields: proxyRouting("POST", "a b"), Field: "routing.path"},
	{Name: "backslash", Fields: proxyRouting("POST", `a\..\b`), Field: "routing.path"},
	{Name: "encoded slash climbs", Fields: proxyRouting("POST", "..%2f..%2fconnection"), Field: "routing.path"},
	{Name: "encoded backslash", Fields: proxyRouting("POST", "a%5c..%5cb"), Field: "routing.path"},
}
