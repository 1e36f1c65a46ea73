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
// When redis-server (7.0 or newer) is not in PATH, [Start] and [StartCluster]
// skip the test with a loud message; with OBOL_REQUIRE_REDIS=1 in the
// environment they fail it instead, so that CI never passes by skipping.
//
// The decisions behind it (configuration, ports, [Server.Restart], how
// clusters are assembled, what [Server.Do] is for) are in the folder's
// README.md.
package redistest
