// Package brokertest is the conformance suite that every broker adapter
// passes: what docs/DESIGN.md, "Brokers (federated routes)", asks of a
// [broker.Broker] whatever the vendor. One request per attempt and no retry
// of its own, the Route the claim pins is the route the request takes, bad
// configuration, routing and arguments refused before any byte is sent, the
// idempotency key never sent, the broker's credential scrubbed from every
// answer and record and absent from every error and log value.
//
// The one recommended path, in an adapter package's tests: [Run] with a
// [Harness] saying how to configure the adapter and which routings it
// serves:
//
//	func TestConformance(t *testing.T) {
//		brokertest.Run(t, brokertest.Harness[mybroker.Config]{
//			Kind:   mybroker.Kind,
//			Config: func(base, secret string) mybroker.Config { return mybroker.Config{BaseURL: base, Key: secret} },
//			New:    func(c mybroker.Config) (broker.Broker, error) { return mybroker.New(c) },
//			// SecretField, Routings, BadRoutings, BadArguments, Reply
//		})
//	}
//
// The request shapes a vendor documents (headers, envelopes) stay in the
// adapter's own tests, which may use this package's [Fake] broker.
package brokertest
