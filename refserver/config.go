package main

import (
	"fmt"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/mcpgateway/gatewayconfig"
	"github.com/obol-gateway/obol/retry"
)

// config is a loaded configuration file (gatewayconfig).
type config struct {
	*gatewayconfig.Config
}

// loadConfig loads a configuration file's bytes, its secret_env names
// resolved by getenv; exec sends every native tool's and broker's attempts.
func loadConfig(data []byte, getenv func(string) (string, bool), exec *retry.Executor) (*config, error) {
	return wrapConfig(gatewayconfig.Load(data, gatewayconfig.Options{Getenv: getenv, Executor: exec}))
}

func wrapConfig(c *gatewayconfig.Config, err error) (*config, error) {
	if err != nil {
		return nil, err
	}
	return &config{Config: c}, nil
}

// maxAttemptTimeout is the longest attempt timeout of any configured tool.
func (c *config) maxAttemptTimeout() time.Duration {
	var d time.Duration
	for _, t := range c.Tools {
		d = max(d, t.Spec.AttemptTimeout())
	}
	return d
}

// envDeploymentID names the environment variable that may hold the fleet's
// deployment id, as deployment_id does in the file.
const envDeploymentID = "OBOL_DEPLOYMENT_ID"

// resolveDeployment sets the store's deployment id: the file's
// deployment_id, else $OBOL_DEPLOYMENT_ID (when both are set they must be
// the same). Production on a Redis (not the embedded store, which keeps
// nothing anyway) requires one (docs/DESIGN.md, "The key on the vendor
// hop"): an id made by a gateway lives only in Redis, so a Redis that lost
// its data would give the fleet another, and vendors could no longer
// deduplicate the retries of calls whose records were lost.
func (c *config) resolveDeployment(getenv func(string) string, embedded bool) error {
	env := getenv(envDeploymentID)
	if env != "" {
		if err := redisstore.ValidateDeploymentID(env); err != nil {
			return fmt.Errorf("refserver: %s: %w", envDeploymentID, err)
		}
	}
	switch file := c.Store.DeploymentID; {
	case file != "" && env != "" && file != env:
		return fmt.Errorf("refserver: deployment_id in the configuration and %s differ: set one of them", envDeploymentID)
	case file == "":
		c.Store.DeploymentID = env
	}
	if c.Store.DeploymentID == "" && c.Environment == effectspec.Production && !embedded {
		return fmt.Errorf("refserver: production requires the fleet's deployment id: set deployment_id in the configuration "+
			"or %s to 32 lowercase hex digits made once for the fleet (openssl rand -hex 16), the same on every gateway", envDeploymentID)
	}
	return nil
}
