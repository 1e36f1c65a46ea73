// Package lifecycle is the executable statement of the claim lifecycle of
// DESIGN, section "The record and its lifecycle": one pure function per
// transition, over a [Record] value (or nil: none), a request and a clock
// (milliseconds of the store's clock, Redis TIME in redisstore), returning
// the [Result] (the values the Lua script of the same name replies) and
// the [Write] (the record as stored after the step and the unknown-index
// change, or none).
//
//	res, w := lifecycle.Claim(cur, req, now)
//	if w.Record != nil {
//		cur = w.Record // what the store keeps
//	}
//
// The transitions are [Claim], [Reserve], [Renew], [Finalize], [GiveBack],
// [Decide], [Settle] and [Expire] (the record's retention running out);
// each cites the DESIGN rows it implements. redisstore's scripts are
// proven equal to them by a differential test, and storetest's model store
// is built on them, so a rule changes here, in one Lua script and in
// DESIGN, together.
//
// A [Record] holds the stored fields by meaning (the Lua tags of
// lua/common.lua in its field docs); records written by earlier releases
// (hex digests, no incarnation) are the stores' concern, not this
// package's.
package lifecycle
