package redistest

import "syscall"

// sysProcAttr kills the server when the test binary dies (a panic or a -timeout),
// so that no redis-server outlives its test.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
