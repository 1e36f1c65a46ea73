// Package gatewayconfig reads the gateway's configuration file (JSON; the
// format and its rules are docs/DESIGN.md, "refserver config (JSON)"):
// workspaces and their API keys, approvers, connections, brokers, tools with
// their EffectSpecs, and capabilities. It checks the whole file, reports
// every problem at once by field path and never a value ([Error]), and
// resolves each tool into an [mcpgateway.Tool] with its route and target.
//
// The one recommended path: load the file, open the store with its options,
// and serve the gateway it describes:
//
//	cfg, err := gatewayconfig.LoadFile(ctx, "gateway.json", gatewayconfig.Options{})
//	store, err := redisstore.New(ctx, client, cfg.Store)
//	gc := cfg.Gateway() // tools, capabilities, authentication, redaction
//	gc.Orchestrator = &retry.Orchestrator{Store: store, Policy: cfg.Policy}
//	gw, err := mcpgateway.New(gc)
//
// [Config.Approver] names the approver of a key for the admin endpoints.
// Secrets come from the environment variables secret_env names
// ([Options].Getenv); [Config].Secrets lists them, and every key, for
// redaction.
package gatewayconfig
