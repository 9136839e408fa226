package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// 100 on every Linux that Go supports.
const clockTick = 10 * time.Millisecond

// processCPU is the user + system CPU a process has used so far, from
// /proc/<pid>/stat (fields 14 and 15, after the command name in
// parentheses, which may itself hold spaces).
func processCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, fields[11], fields[12])
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// peakRSS is the process's peak resident set (VmHWM in /proc/<pid>/status).
func peakRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmHWM", pid)
}

// idleCPU is what the process spends in d with no requests: its workers
// (janitor, reconciler, outbox) poll on timers. Subtracted from a window's
// CPU, it leaves what the requests cost.
func idleCPU(ctx context.Context, pid int, d time.Duration) (time.Duration, error) {
	before, err := processCPU(pid)
	if err != nil {
		return 0, err
	}
	sleep(ctx, d)
	after, err := processCPU(pid)
	return after - before, err
}

// cpuWindow wraps a measuring window so that it records the process's CPU
// over exactly the window.
func cpuWindow(pid int, window func(context.Context), spent *time.Duration, failed *error) func(context.Context) {
	return func(ctx context.Context) {
		before, err := processCPU(pid)
		window(ctx)
		after, err2 := processCPU(pid)
		if err := errors.Join(err, err2); err != nil {
			*failed = fmt.Errorf("reading the API's CPU: %w", err)
			return
		}
		*spent = after - before
	}
}
