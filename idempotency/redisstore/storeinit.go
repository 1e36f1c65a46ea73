package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
)

// InitOptions are [Init]'s choices beyond the store's [Options].
type InitOptions struct {
	// AdoptRecords writes the fleet's scope version on a prefix that holds
	// records but no scope version (written before the key existed): the
	// operator counted them ([CountRecords], refserver scope-status) and
	// found every live one of this build's version.
	AdoptRecords bool
}

// InitResult is what [Init] did.
type InitResult struct {
	// Wrote: [Init] wrote something; false when the store was initialised
	// already (nothing written).
	Wrote bool
	// Generations is how many generation sentinels [Init] wrote.
	Generations int
	// ScopeVersion and Deployment are the fleet's, as stored now.
	ScopeVersion, Deployment string
}

// Init initialises a store explicitly, as a production fleet requires
// ([Options.RequireInit]; docs/DESIGN.md, "The record and its lifecycle",
// Store amnesia): the fleet's scope version (on a prefix without records,
// or with [InitOptions.AdoptRecords]), its deployment id ([Options.DeploymentID],
// or a fresh one; a configured one that differs from the stored one is
// [ErrDeploymentMismatch]), the sentinels and the generation sentinels, each
// only where it is missing. A store initialised already is left as it is
// ([InitResult.Wrote] false). It refuses ([idempotency.ErrStoreDataLost]) while the fleet's marker
// records a loss nobody acknowledged: the acknowledgement, not a new start,
// is what lets the fleet claim again.
func Init(ctx context.Context, client rueidis.Client, opts Options, iopts InitOptions) (InitResult, error) {
	if client == nil {
		return InitResult{}, errors.New("redisstore: nil client")
	}
	opts, err := opts.Resolve()
	if err != nil {
		return InitResult{}, err
	}
	m, err := client.Do(ctx, client.B().Get().Key(markerKey(opts.Prefix)).Build()).ToString()
	switch {
	case rueidis.IsRedisNil(err):
	case err != nil:
		return InitResult{}, fmt.Errorf("redisstore: data-loss marker: %w", err)
	case !strings.HasPrefix(m, markerAck):
		return InitResult{}, fmt.Errorf("redisstore: %w: %s records a loss of data that no operator has acknowledged: "+
			"acknowledge it (refserver store acknowledge-data-loss) instead of initialising the store", idempotency.ErrStoreDataLost, markerKey(opts.Prefix))
	}
	var res InitResult

	// The scope version, as [New] writes it, or over records if adopted.
	c := &scopeCheck{client: client, key: scopeVersionKey(opts.Prefix), want: strconv.Itoa(idempotency.ScopeVersion), timeout: opts.ReadTimeout}
	v, err := c.get(ctx)
	switch {
	case rueidis.IsRedisNil(err):
		if v, err = c.create(ctx, opts.Prefix, iopts.AdoptRecords); err != nil {
			return InitResult{}, err
		}
		res.Wrote = v == c.want
	case err != nil:
		return InitResult{}, fmt.Errorf("redisstore: scope version: %w", err)
	}
	if v != c.want {
		return InitResult{}, fmt.Errorf("redisstore: %w: %s holds %s, this build's is %s", idempotency.ErrScopeVersionChanged, c.key, versionText(v), c.want)
	}
	res.ScopeVersion = v

	had, err := client.Do(ctx, client.B().Exists().Key(deploymentKey(opts.Prefix)).Build()).AsInt64()
	if err != nil {
		return InitResult{}, fmt.Errorf("redisstore: deployment id: %w", err)
	}
	if res.Deployment, err = initDeployment(ctx, client, opts.Prefix, opts.DeploymentID, true); err != nil {
		return InitResult{}, err
	}
	res.Wrote = res.Wrote || had == 0

	a := &amnesia{client: client, prefix: opts.Prefix, cluster: client.Mode() == rueidis.ClientModeCluster}
	a.gens = newGens(a.prefix, a.cluster)
	if _, err := a.place(ctx, nil); err != nil {
		return InitResult{}, err
	}
	st, err := readGens(ctx, client, a.gens)
	if err != nil {
		return InitResult{}, err
	}
	if res.Generations, err = fillGens(ctx, client, a.gens, st); err != nil {
		return InitResult{}, err
	}
	res.Wrote = res.Wrote || res.Generations > 0
	return res, nil
}
