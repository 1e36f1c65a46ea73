// Package broker dispatches federated tool calls through catalog brokers
// (DESIGN.md section 10). A broker is a vendor hop, never an authority: it
// gets exactly one request per reserved attempt, it never retries on its own,
// and it never sees the idempotency key.
//
// The adapters live in broker/nango and broker/composio. The one recommended
// path: build the adapter from configuration, prepare each tool's routing
// when the tool is loaded (one validation gives the Route the claim pins and
// the Target that sends it), and hand the orchestrator the Target:
//
//	nb, err := nango.New(nango.Config{
//		BaseURL: "https://api.nango.dev",
//		Secret:  os.Getenv("NANGO_SECRET_KEY"),
//	})
//	if err != nil {
//		return err // names the field, never the secret
//	}
//	routing := map[string]string{
//		"connection_id":       "user-42",
//		"provider_config_key": "github",
//		"action":              "create-issue",
//	}
//	target, route, err := broker.Prepare(nb, "github.create_issue", routing)
//	if err != nil {
//		return err
//	}
//
// The tool's EffectSpec must declare route "federated" and binding
// "unsupported"; ValidateSpec says so, and Target checks it again on every
// attempt. A receipt of a federated call therefore shows binding
// "unsupported" and propagation "none" (effectspec.Spec.Propagation).
//
// # Decisions where the contract is silent
//
//   - A Broker reports exactly what the retry.Executor reports. Statuses pass
//     through unchanged, including the broker's own (a Nango 404 for an
//     unknown connection, a Composio 401): the tool's EffectSpec classifies
//     them like any vendor status, so a federated spec should list the
//     broker's refusals it knows to be harmless. The one translation is
//     Composio's "successful": false, documented in broker/composio.
//   - A call refused before sending (bad routing, arguments the broker cannot
//     carry, a spec with a vendor binding) is Refused: before_send with
//     retry.ErrInvalidRequest in its chain, exactly like a request the
//     Executor refuses, so the orchestrator knows a second attempt cannot
//     help.
//   - Call has no key field, so no adapter can propagate it by mistake. Its
//     Attempt number is informational and nothing derived from it is sent.
//   - Route's Connection is the broker-side connection (Nango connection_id,
//     Composio connected_account_id), not the gateway's broker id: it decides
//     where the effect lands, so a key reused against another broker-side
//     connection is a destination_conflict. Broker names the adapter kind.
//   - Configuration errors are reported all at once (errors.Join of
//     *FieldError). No error quotes a secret, and none quotes a base URL,
//     which could carry credentials in its path. Config types redact their
//     secret in String, GoString and LogValue. A secret shorter than
//     receipt.MinSecretLen is refused (receipt.ErrShortSecret).
//   - The broker's key never comes back: each adapter reports it (a
//     Secrets method) and Target passes it on as a retry.SecretHolder, so
//     the orchestrator scrubs it from the answer a broker or its tool echoes
//     before the answer is stored or returned.
//   - Adapters use their own zero retry.Executor unless given one; sharing
//     the gateway's Executor shares its limits and keep-alive pool.
package broker
