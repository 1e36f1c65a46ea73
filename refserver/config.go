package main

import (
	"strconv"
	"time"

	"github.com/obol-gateway/obol/internal/ident"
	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/mcpgateway/gatewayconfig"
	"github.com/obol-gateway/obol/retry"
)

// config is a loaded configuration file (gatewayconfig) with the lookups the
// admin endpoints make.
type config struct {
	*gatewayconfig.Config
	workspaces []string // the configured workspace ids
}

// tool is a configured tool.
type tool = mcpgateway.Tool

// loadConfig loads a configuration file's bytes, its secret_env names
// resolved by getenv; exec sends every native tool's and broker's attempts.
func loadConfig(data []byte, getenv func(string) (string, bool), exec *retry.Executor) (*config, error) {
	return wrapConfig(gatewayconfig.Load(data, gatewayconfig.Options{Getenv: getenv, Executor: exec}))
}

func wrapConfig(c *gatewayconfig.Config, err error) (*config, error) {
	if err != nil {
		return nil, err
	}
	return &config{Config: c, workspaces: c.Workspaces}, nil
}

func (c *config) workspace(apiKey string) (string, bool) { return c.Workspace(apiKey) }

func (c *config) approver(k string) (string, bool) { return c.Approver(k) }

// maxAttemptTimeout is the longest attempt timeout of any configured tool.
func (c *config) maxAttemptTimeout() time.Duration {
	var d time.Duration
	for _, t := range c.Tools {
		d = max(d, t.Spec.AttemptTimeout())
	}
	return d
}

// quoteName shows a name in an error: as is when it is a valid tool name,
// quoted and cut short otherwise.
func quoteName(s string) string {
	if ident.Valid(s) {
		return s
	}
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)
}
