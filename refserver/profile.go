package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// profiles holds the diagnosis files of -cpuprofile and -exectrace. They
// cover serving only (from listen to the end of shutdown), so that start-up
// does not blur what a call costs. A CPU profile shows where refserver
// spends CPU; at low concurrency a call is mostly waiting, and the execution
// trace shows on what: `go tool trace -pprof=sched` the time goroutines sat
// runnable, `-pprof=net` the time they waited on Redis, the vendor and the
// client.
type profiles struct {
	cpu, exec *os.File
	started   bool
}

// createProfiles creates the files named (either may be ""), before the
// store is opened, so that a bad path fails at once.
func createProfiles(cpuPath, execPath string) (*profiles, error) {
	p := &profiles{}
	var err error
	if cpuPath != "" {
		if p.cpu, err = os.Create(cpuPath); err != nil {
			return nil, fmt.Errorf("refserver: -cpuprofile: %w", err)
		}
	}
	if execPath != "" {
		if p.exec, err = os.Create(execPath); err != nil {
			p.close()
			return nil, fmt.Errorf("refserver: -exectrace: %w", err)
		}
	}
	return p, nil
}

func (p *profiles) start() error {
	if p.cpu != nil {
		if err := pprof.StartCPUProfile(p.cpu); err != nil {
			return fmt.Errorf("refserver: -cpuprofile: %w", err)
		}
	}
	if p.exec != nil {
		if err := trace.Start(p.exec); err != nil {
			if p.cpu != nil {
				pprof.StopCPUProfile()
			}
			return fmt.Errorf("refserver: -exectrace: %w", err)
		}
	}
	p.started = true
	return nil
}

// stop ends what start began and closes the files: the profile is written
// out here. Calling it again, or without start, only closes what is open.
func (p *profiles) stop() error {
	if p.started {
		p.started = false
		if p.cpu != nil {
			pprof.StopCPUProfile()
		}
		if p.exec != nil {
			trace.Stop()
		}
	}
	return p.close()
}

func (p *profiles) close() error {
	var errs []error
	for _, f := range []**os.File{&p.cpu, &p.exec} {
		if *f != nil {
			errs = append(errs, (*f).Close())
			*f = nil
		}
	}
	return errors.Join(errs...)
}
