// Package broker dispatches federated tool calls through catalog brokers
// (docs/DESIGN.md, "Brokers (federated routes)"). A broker is a vendor hop,
// never an authority: it gets exactly one request per reserved attempt, it
// never retries on its own, and it never sees the idempotency key.
//
// The adapters live in broker/nango and broker/composio. The one recommended
// path: build the adapter from configuration and [Prepare] each tool's
// routing when the tool is loaded (one validation gives the
// [idempotency.Route] the claim pins and the [retry.Target] that sends it):
//
//	nb, err := nango.New(nango.Config{
//		BaseURL: "https://api.nango.dev",
//		Secret:  os.Getenv("NANGO_SECRET_KEY"),
//	})
//	if err != nil {
//		return err // names the field, never the secret
//	}
//	target, route, err := broker.Prepare(nb, "github.create_issue", map[string]string{
//		"connection_id": "user-42", "provider_config_key": "github",
//		"action": "create-issue",
//	})
//
// The tool's EffectSpec must declare route "federated" and binding
// "unsupported" ([ValidateSpec]). An adapter implements [Broker] (and
// Prepare and Secrets, as [Prepare] and [Target] say) and passes the suite
// of broker/brokertest.
package broker
