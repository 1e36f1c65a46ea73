//go:build !unix

package mcpgateway

import "time"

// processCPU is 0 where getrusage is not: the metric then reads 0.
func processCPU() time.Duration { return 0 }
