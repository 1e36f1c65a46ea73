// Package operator is the operator's command line over [admin.Client]: the
// subcommands a gateway binary offers next to its server, so that people
// list and settle unknown calls, decide approvals, advance the scope
// version and acknowledge a store's data loss without Redis credentials.
// Every decision stays with the gateway that enforces the contract.
//
// A gateway's main hands its arguments to [Run] before it parses its own
// flags:
//
//	if code, ok := operator.Run(ctx, "mygateway", os.Args[1:], os.Stdout, os.Stderr, os.Getenv); ok {
//		os.Exit(code)
//	}
//
// Each subcommand talks to the admin API at -url (default
// http://127.0.0.1:8080), prints a table for people or JSON with -json, and
// takes the approver key from the environment variable [EnvApproverKey]
// only: a flag would put it in argv, which every user of the machine can
// read. The commands and their flags are in docs/DESIGN.md, "refserver
// wire contract".
package operator
