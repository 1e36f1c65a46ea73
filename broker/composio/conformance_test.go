package composio_test

import (
	"fmt"
	"testing"

	"github.com/obol-gateway/obol/broker"
	"github.com/obol-gateway/obol/broker/brokertest"
	"github.com/obol-gateway/obol/broker/composio"
)

func TestConformance(t *testing.T) {
	brokertest.Run(t, brokertest.Harness[composio.Config]{
		Kind:        composio.Kind,
		Config:      func(base, secret string) composio.Config { return composio.Config{BaseURL: base, APIKey: secret} },
		New:         func(c composio.Config) (broker.Broker, error) { return composio.New(c) },
		SecretField: "APIKey",
		Routings: []brokertest.Routing{
			{Name: "account and user", Fields: routing(), Path: "/api/v3/tools/execute/GITHUB_CREATE_AN_ISSUE"},
			{Name: "user only", Fields: map[string]string{"tool_slug": "GITHUB_CREATE_AN_ISSUE", "user_id": "user-42"}, Path: "/api/v3/tools/execute/GITHUB_CREATE_AN_ISSUE"},
			{Name: "other tool", Fields: map[string]string{"tool_slug": "GITHUB_CLOSE_AN_ISSUE", "connected_account_id": "ca_123"}, Path: "/api/v3/tools/execute/GITHUB_CLOSE_AN_ISSUE"},
		},
		BadRoutings: []brokertest.BadRouting{
			{Name: "slug with slash", Fields: map[string]string{"tool_slug": "A/../B", "user_id": "u"}, Field: "routing.tool_slug"},
			{Name: "no slug", Fields: map[string]string{"user_id": "u"}, Field: "routing.tool_slug"},
			{Name: "slug with dot", Fields: map[string]string{"tool_slug": "..", "user_id": "u"}, Field: "routing.tool_slug"},
			{Name: "no ids", Fields: map[string]string{"tool_slug": "A"}, Field: "routing.connected_account_id"},
			{Name: "empty id", Fields: map[string]string{"tool_slug": "A", "user_id": "u", "connected_account_id": ""}, Field: "routing.connected_account_id"},
			{Name: "bad user id", Fields: map[string]string{"tool_slug": "A", "user_id": "u 1"}, Field: "routing.user_id"},
			{Name: "unknown field", Fields: map[string]string{"tool_slug": "A", "user_id": "u", "entity_id": "e"}, Field: `routing."entity_id"`},
		},
		// Composio's "arguments" is an object.
		BadArguments: []string{`[1]`, `"null"`, `1`},
		Reply: func(data []byte) []byte {
			return fmt.Appendf(nil, `{"successful":true,"data":%s,"error":null}`, data)
		},
	})
}
