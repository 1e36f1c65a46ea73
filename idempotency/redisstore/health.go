package redisstore

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
)

// healthSrc is a script with a shebang and no flags: Redis 7 refuses such a
// script before it runs wherever it would refuse a write (out of memory
// under noeviction, a read-only replica, loading, a cluster that is down or
// failing over), which is where a claim would fail. It touches no key.
const healthSrc = "#!lua\nreturn 1\n"

// Health reports whether a claim could be written now on every master: nil,
// or an *UnhealthyError. Unlike a read or a PING, it fails where writes do:
// Redis out of memory (noeviction refuses writes), a replica that became
// read-only, a node loading its data set, a Cluster that is down or failing
// over. It writes nothing. Bound it with ctx (ReadTimeout does not apply).
// It also fails while the fleet's scope version is not this store's, and
// while the store knows of a loss of data, both read again at most once per
// lease as by a claim; a node found unreachable or loading has them read
// again at the next check or claim (it may come back empty).
func (s *Store) Health(ctx context.Context) error {
	switch err := s.scope.check(ctx); {
	case errors.Is(err, idempotency.ErrStoreDataLost):
		return &idempotency.UnhealthyError{Reason: "store_data_lost", Err: err}
	case errors.Is(err, idempotency.ErrScopeVersionChanged):
		return &idempotency.UnhealthyError{Reason: "scope_version_conflict", Err: err}
	}
	err := s.health(ctx)
	var ue *idempotency.UnhealthyError
	if errors.As(err, &ue) && (ue.Reason == "unreachable" || ue.Reason == "loading") {
		s.scope.stale.Store(true)
	}
	return err
}

// health is Health's check of every master.
func (s *Store) health(ctx context.Context) error {
	nodes := s.client.Nodes()
	for addr, n := range nodes {
		if len(nodes) > 1 {
			// A Cluster: replicas refuse writes by design; check masters.
			role, err := n.Do(ctx, n.B().Role().Build()).ToArray()
			if err != nil {
				return unhealthy(addr, err)
			}
			if len(role) > 0 {
				if r, _ := role[0].ToString(); r != "master" {
					continue
				}
			}
		}
		err := n.Do(ctx, n.B().Eval().Script(healthSrc).Numkeys(0).Build()).Error()
		if re, ok := rueidis.IsRedisErr(err); ok && strings.Contains(re.Error(), "compiling script") {
			// miniredis (the embedded store) has no script flags; it never
			// runs out of memory or turns read-only, so reaching it is enough.
			err = n.Do(ctx, n.B().Eval().Script("return 1").Numkeys(0).Build()).Error()
		}
		if err != nil {
			return unhealthy(addr, err)
		}
	}
	return nil
}

func unhealthy(addr string, err error) error {
	reason := "unreachable"
	if re, ok := rueidis.IsRedisErr(err); ok {
		msg := re.Error()
		switch {
		case strings.HasPrefix(msg, "OOM"):
			reason = "out_of_memory"
		case strings.HasPrefix(msg, "READONLY"):
			reason = "read_only"
		case strings.HasPrefix(msg, "LOADING"):
			reason = "loading"
		case strings.HasPrefix(msg, "CLUSTERDOWN"), strings.HasPrefix(msg, "TRYAGAIN"),
			strings.HasPrefix(msg, "MASTERDOWN"), strings.HasPrefix(msg, "MOVED"), strings.HasPrefix(msg, "ASK"):
			reason = "failing_over"
		default:
			reason = "error"
		}
	} else if errors.Is(err, context.Canceled) {
		reason = "error"
	}
	return &idempotency.UnhealthyError{Reason: reason, Node: addr, Err: err}
}
