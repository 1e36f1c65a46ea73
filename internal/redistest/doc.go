// Package redistest starts real redis-server processes for tests: single
// servers and Redis Clusters, each on free loopback ports in a temporary
// directory, killed when the test ends.
//
// The one recommended path:
//
//	srv := redistest.Start(t)                   // --save "" --appendonly no
//	client, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}})
//
//	cl := redistest.StartCluster(t, 3, 0)       // 3 masters, cluster_state:ok
//	client, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Addrs()})
//
// When redis-server (7.0 or newer) is not in PATH, Start and StartCluster skip
// the test with a loud message; with OBOL_REQUIRE_REDIS=1 in the environment
// they fail it instead, so that CI never passes by skipping.
//
// Decisions:
//
//   - Configuration goes into a redis.conf in the server's directory; the
//     arguments given to Start follow it on the command line and so override
//     it (e.g. "--appendonly", "yes", "--appendfsync", "always").
//   - Ports come from the kernel (listen on 127.0.0.1:0, then close). A server
//     that loses the race for its port is started again on another one, a few
//     times, before the test fails.
//   - Restart keeps the port, the directory (and so AOF/RDB files and a
//     cluster node's nodes.conf) and the arguments; it kills the old process
//     first if it is still running.
//   - Clusters are assembled directly (CLUSTER SET-CONFIG-EPOCH, ADDSLOTSRANGE,
//     MEET, REPLICATE) rather than with redis-cli --cluster create, which waits
//     in whole seconds; a 3-master cluster is up in well under a second.
//     Nodes of a cluster with replicas use cluster-node-timeout 1000 ms so
//     failover tests stay short; without replicas, Redis' 15 s, so that a
//     loaded machine's pauses never mark a node failed (CLUSTERDOWN).
//   - Server.Do speaks just enough RESP for test set-up (CONFIG SET, DEBUG,
//     CLUSTER ...); it is not a client for the code under test.
package redistest
