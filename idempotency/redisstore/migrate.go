package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// Re-sends of a script answered TRYAGAIN back off from migrationBackoff,
// doubling, to migrationBackoffMax ([Options.MigrationWait] bounds them all).
const (
	migrationBackoff    = 2 * time.Millisecond
	migrationBackoffMax = 100 * time.Millisecond
	// maxRedirects bounds the ASK and MOVED answers one send of a WAITed
	// script follows: a slot moves between two nodes, so two suffice once
	// the redirecting nodes agree; more means a slot map in flux, and the
	// send is tried again after a backoff.
	maxRedirects = 4
)

// exec runs one script on key. With wait set and WaitReplicas > 0 it pins a
// connection and pipelines WAIT behind the script, since WAIT only covers
// the writes of its own connection (execWait). It returns the reply and the
// replica acknowledgements (-1 when no WAIT ran).
func (s *Store) exec(ctx context.Context, sc *script, key string, args []string, wait bool) ([]rueidis.RedisMessage, int64, error) {
	return s.execKeys(ctx, sc, []string{key}, args, wait)
}

// execKeys is exec on the keys of one slot: the record and its index
// bucket. A send that Redis did not run because the slot is migrating
// (TRYAGAIN; on the WAIT path also an ASK or MOVED it could not follow) is
// sent again after a backoff, until [Options.MigrationWait] or ctx ends. Only
// those answers are re-sent: Redis ran nothing, so the re-send is the first
// time the script runs. A lost reply (a timeout, a cut connection) is
// returned as it is, since the script may have run; its caller re-sends
// with the same op id.
func (s *Store) execKeys(ctx context.Context, sc *script, keys []string, args []string, wait bool) ([]rueidis.RedisMessage, int64, error) {
	arr, acks, err := s.execOnce(ctx, sc, keys, args, wait)
	if !notRun(err) {
		return arr, acks, err
	}
	return s.resend(ctx, sc, keys, args, wait, err)
}

// resend is execKeys after a first send answered err, which Redis did not
// run.
func (s *Store) resend(ctx context.Context, sc *script, keys []string, args []string, wait bool, err error) ([]rueidis.RedisMessage, int64, error) {
	end := time.Now().Add(s.migrateWait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(end) {
		end = dl
	}
	for d := migrationBackoff; ; d = min(2*d, migrationBackoffMax) {
		// Equal jitter: callers that met the same migration do not re-send
		// in step.
		pause := d/2 + rand.N(d/2+1)
		if time.Until(end) < pause {
			return nil, -1, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, -1, err
		case <-t.C:
		}
		var arr []rueidis.RedisMessage
		var acks int64
		arr, acks, err = s.execOnce(ctx, sc, keys, args, wait)
		if !notRun(err) {
			return arr, acks, err
		}
	}
}

// notRun reports whether err is an answer of a Cluster node that ran
// nothing because a slot is moving: TRYAGAIN, and an ASK or MOVED that
// reached the caller (the WAIT path follows them itself; one it could not
// follow names a node the client does not know yet).
func notRun(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	if re.IsTryAgain() {
		return true
	}
	_, moved := re.IsMoved()
	_, ask := re.IsAsk()
	return moved || ask
}

// execOnce is one send of the script. rueidis follows ASK and MOVED for
// the commands it sends itself (Lua.Exec), but re-sends a TRYAGAIN only
// for commands marked retryable, which would also re-send a write whose
// reply was lost, so the scripts are not (scripts.go) and execKeys
// re-sends TRYAGAIN itself.
func (s *Store) execOnce(ctx context.Context, sc *script, keys []string, args []string, wait bool) ([]rueidis.RedisMessage, int64, error) {
	if sc.rw != nil {
		if !s.noTimeInRO.Load() {
			arr, err := sc.lua.Exec(ctx, s.client, keys, args).ToArray()
			if err == nil || !strings.Contains(err.Error(), "not allowed in read-only scripts") {
				return arr, -1, err
			}
			s.noTimeInRO.Store(true)
		}
		arr, err := sc.rw.Exec(ctx, s.client, keys, args).ToArray()
		return arr, -1, err
	}
	if !wait || s.waitN == 0 {
		arr, err := sc.lua.Exec(ctx, s.client, keys, args).ToArray()
		return arr, -1, err
	}
	return s.execWait(ctx, sc, keys, args)
}

// execWait runs the script and WAIT on one dedicated connection, so that
// the WAIT counts the replicas of the node that ran the script. rueidis'
// dedicated connections follow neither ASK nor MOVED, so it follows them
// here: on the node the redirect names (a connection of the client's own,
// Client.Nodes), with ASKING before the script for an ASK, and WAIT on that
// same connection. A redirect to a node the client does not know yet is
// returned (execKeys re-sends it once the client's slot map, which the
// redirect made it refresh, knows the node).
func (s *Store) execWait(ctx context.Context, sc *script, keys []string, args []string) ([]rueidis.RedisMessage, int64, error) {
	var node rueidis.Client // nil: the node the client maps the slot to
	asking := false
	for redirects := 0; ; redirects++ {
		arr, acks, err := s.evalWait(ctx, node, sc, keys, args, asking)
		re, ok := rueidis.IsRedisErr(err)
		if !ok || redirects == maxRedirects {
			return arr, acks, err
		}
		addr, moved := re.IsMoved()
		asking = false
		if !moved {
			if addr, asking = re.IsAsk(); !asking {
				return arr, acks, err
			}
		}
		if node = s.client.Nodes()[addr]; node == nil {
			return arr, acks, err
		}
	}
}

// evalWait sends [ASKING,] EVALSHA (EVAL on NOSCRIPT: a node added to the
// Cluster has none of the scripts) and WAIT on one connection of node, or
// of the node the client maps the keys' slot to when node is nil.
func (s *Store) evalWait(ctx context.Context, node rueidis.Client, sc *script, keys []string, args []string, asking bool) ([]rueidis.RedisMessage, int64, error) {
	if node == nil {
		node = s.client
	}
	dc, release := node.Dedicate()
	defer release()
	send := func(eval rueidis.Completed) []rueidis.RedisResult {
		cmds := make(rueidis.Commands, 0, 3)
		if asking {
			cmds = append(cmds, dc.B().Asking().Build())
		}
		cmds = append(cmds, eval, dc.B().Wait().Numreplicas(s.waitN).Timeout(s.waitMS).Build())
		res := dc.DoMulti(ctx, cmds...)
		return res[len(res)-2:]
	}
	res := send(dc.B().Evalsha().Sha1(sc.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	if re, ok := rueidis.IsRedisErr(res[0].Error()); ok && re.IsNoScript() {
		res = send(dc.B().Eval().Script(sc.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	}
	arr, err := res[0].ToArray()
	if err != nil {
		return nil, -1, err
	}
	acks, err := res[1].AsInt64()
	if err != nil {
		return nil, -1, fmt.Errorf("WAIT: %w", err)
	}
	return arr, acks, nil
}

// replayOf decides a claim that a migrating slot answered TRYAGAIN from
// the record alone (the one-key lookup, which rueidis sends to whichever
// node holds the record, following ASK): a final record whose request hash
// and scope version are the claim's is the replay the claim script would
// answer, and a replay writes nothing, so reading it is the claim. The
// script needs the record's index bucket on the same node, and a slot
// holding only final records has no bucket at all, so without this a
// replay would wait for the slot's whole move. Anything else (no record, a
// record not final, or one the claim would refuse) is left to the claim
// script: ok is false.
func (s *Store) replayOf(ctx context.Context, req idempotency.ClaimRequest, rh string) (res idempotency.ClaimResult, ok bool) {
	rec, err := s.Lookup(ctx, req.Scope, req.Key)
	if err != nil || rec.State != effectspec.Accepted && rec.State != effectspec.DefinitelyRejected ||
		rec.ScopeVersion != idempotency.ScopeVersion {
		return res, false
	}
	if got, err := digestOf("request hash", rec.RequestHash); err != nil || got != rh {
		return res, false
	}
	return idempotency.ClaimResult{Status: idempotency.StatusReplay, Record: &rec}, true
}
