//go:build unix

package mcpgateway

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used, user and system, of
// every thread: what a shared machine's wall clock does not show.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
