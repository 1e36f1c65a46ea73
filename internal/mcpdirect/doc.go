// Package mcpdirect is the gateway's bypass of the go-sdk, on the two
// paths where the SDK's cost is in the way; what it writes is, byte for
// byte, what the SDK writes.
//
// The direct path, [Server.Serve]: for every POST, the SDK's stateless
// handler builds a session, a JSON-RPC connection with its goroutines, a
// decoder buffer per decode and the answer's encoding through three
// Marshalers. The gateway's front has already read the message strictly,
// so for a tools/call of one of its tools it calls the tool handler itself
// and encodes the answer as the SDK does. Everything else, and any
// tools/call whose headers or protocol version the SDK would treat
// otherwise, still goes to the SDK.
//
// The splice, [Splice]: the SDK encodes a result's receipt and vendor body
// again at every level they are nested in, so the result holds
// placeholders and [Splice.Write] writes each part once in their place.
//
// The differential tests that hold the direct path to the SDK need a whole
// gateway and live in mcpgateway (TestDirectMatchesSDK, FuzzDirect,
// TestSpliceWire); the encoders' own are here.
package mcpdirect
