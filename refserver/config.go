package main

import (
	"time"

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
