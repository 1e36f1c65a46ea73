package redisstore

import (
	"context"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// Description names the Redis a store runs on, for a gateway's startup
// line: node addresses (host:port, never a password), the Redis version,
// the topology and what it persists.
type Description struct {
	Addrs    []string
	Version  string
	Topology string // "standalone", or "cluster of N masters"
	Prefix   string
	// Durability is what every master persists: "aof+rdb", "aof", "rdb",
	// or "none", when a restart of a master loses every claim and a retry
	// after it dispatches again; "" when CONFIG is blocked.
	Durability string
}

// Describe reads what [Description] holds: INFO server and cluster of one
// master, the masters the client sees, and CONFIG GET appendonly and save
// of every master. A failed CONFIG GET only leaves Durability empty.
func (s *Store) Describe(ctx context.Context) (Description, error) {
	d := Description{Prefix: s.prefix, Topology: "standalone"}
	for addr := range s.client.Nodes() {
		d.Addrs = append(d.Addrs, addr)
	}
	sort.Strings(d.Addrs)
	info, err := s.client.Do(ctx, s.client.B().Info().Section("server", "cluster").Build()).ToString()
	if err != nil {
		return d, opError("describe", err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	d.Version = fields["redis_version"]
	if fields["cluster_enabled"] == "1" {
		d.Topology = "cluster of " + strconv.Itoa(len(masters(ctx, s.client))) + " masters"
	}
	d.Durability = s.durability(ctx)
	return d, nil
}

// durability reads the persistence settings of every node (see
// [Description.Durability]), "" where CONFIG is blocked.
func (s *Store) durability(ctx context.Context) string {
	aof, rdb := true, true
	for _, n := range s.client.Nodes() {
		m, err := n.Do(ctx, n.B().ConfigGet().Parameter("appendonly").Parameter("save").Build()).AsStrMap()
		if err != nil {
			return ""
		}
		aof = aof && m["appendonly"] == "yes"
		rdb = rdb && strings.TrimSpace(m["save"]) != ""
	}
	switch {
	case aof && rdb:
		return "aof+rdb"
	case aof:
		return "aof"
	case rdb:
		return "rdb"
	}
	return "none"
}

// CountUnknown counts a workspace's unknown index entries that have not
// expired: its calls that are unknown or whose attempt is in flight (a
// reservation is indexed before it is sent), without reading a record.
// It reads every bucket (ZCOUNT, pipelined listBatch at a time).
func (s *Store) CountUnknown(ctx context.Context, workspace string) (int, error) {
	now, err := redisTime(ctx, s.client)
	if err != nil {
		return 0, opError("count", err)
	}
	from := strconv.FormatInt(now, 10)
	total := 0
	for pos := 0; pos < listPositions; pos += listBatch {
		end := min(pos+listBatch, listPositions)
		cmds := make(rueidis.Commands, 0, end-pos)
		for p := pos; p < end; p++ {
			cmds = append(cmds, s.client.B().Zcount().Key(s.listKey(workspace, p)).Min(from).Max("+inf").Build())
		}
		for _, r := range s.client.DoMulti(ctx, cmds...) {
			n, err := r.AsInt64()
			if err != nil {
				return 0, opError("count", err)
			}
			total += int(n)
		}
	}
	return total, nil
}
