// Package refservertest runs the reference server as a black box for tests
// and speaks its MCP wire.
//
// [Start] builds the binary once per process (see [Binary]), runs it on a
// free loopback port, waits for its "listening on" line and stops it when
// the test ends; [Server.Log] is what it wrote to stderr. [Client.CallTool]
// sends one tools/call as a raw JSON-RPC POST and decodes the answer: the
// result with its receipt, or the error with its data.
//
//	func TestCharge(t *testing.T) {
//		s := refservertest.Start(t, refservertest.Options{Args: []string{"-config", path}})
//		c := refservertest.Client{Base: s.Base, APIKey: "ob_test_key"}
//		r := c.CallTool(context.Background(), refservertest.Request{Tool: "pay.charge", Key: key, Args: args})
//		if r.Err != nil || r.Error != nil || r.Result.Meta.Receipt.Outcome != effectspec.Accepted {
//			t.Fatalf("charge: %s", r)
//		}
//	}
//
// The wire is the one docs/DESIGN.md, "refserver wire contract" defines;
// the server runs the MCP SDK stateless, so a call needs no initialize.
package refservertest
