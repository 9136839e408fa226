package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// 100 on every Linux that Go supports.
const clockTick = 10 * time.Millisecond

// usage is what a process has used so far: its user and system CPU, from
// /proc/<pid>/stat (fields 14 and 15, after the command name in
// parentheses, which may itself hold spaces), and the context switches of
// all its threads, voluntary or not, from /proc/<pid>/task/*/status.
type usage struct {
	user, sys time.Duration
	switches  int64
}

// cpu is the user + system CPU.
func (u usage) cpu() time.Duration { return u.user + u.sys }

// minus is what was used between earlier and u.
func (u usage) minus(earlier usage) usage {
	return usage{user: u.user - earlier.user, sys: u.sys - earlier.sys, switches: u.switches - earlier.switches}
}

func processUsage(pid int) (usage, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return usage{}, err
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return usage{}, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return usage{}, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, fields[11], fields[12])
	}
	u := usage{user: time.Duration(utime) * clockTick, sys: time.Duration(stime) * clockTick}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return usage{}, err
	}
	for _, task := range tasks {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
		if err != nil {
			continue // the thread has just exited
		}
		for line := range strings.Lines(string(status)) {
			if rest, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
				u.switches += n
			} else if rest, ok := strings.CutPrefix(line, "nonvoluntary_ctxt_switches:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
				u.switches += n
			}
		}
	}
	return u, nil
}

// processCPU is the user + system CPU a process has used so far.
func processCPU(pid int) (time.Duration, error) {
	u, err := processUsage(pid)
	return u.cpu(), err
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

// cpuWindow wraps a measuring window so that it records what the process
// used over exactly the window.
func cpuWindow(pid int, window func(context.Context), used *usage, failed *error) func(context.Context) {
	return func(ctx context.Context) {
		before, err := processUsage(pid)
		window(ctx)
		after, err2 := processUsage(pid)
		if err := errors.Join(err, err2); err != nil {
			*failed = fmt.Errorf("reading the API's CPU: %w", err)
			return
		}
		*used = after.minus(before)
	}
}

// loadAverage is the machine's load average over the last minute
// (/proc/loadavg), printed beside each figure: on a shared machine it says
// how far the figure can be trusted. -1 when it cannot be read.
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// gcMeter reads the lines GODEBUG=gctrace=1 makes a Go process write to
// stderr, one per garbage collection, and adds up the CPU each collection
// took while it is on. A line reads
//
//	gc 7 @0.316s 4%: 0.018+1.2+0.021 ms clock, 0.037+0.31/1.0/0.27+0.042 ms cpu, ...
//
// where the CPU part is the stop-the-world sweep termination, the mark
// assists, background and idle marking, and the stop-the-world mark
// termination: all of it is the process's CPU.
type gcMeter struct {
	mu     sync.Mutex
	next   io.Writer // where the output goes on to (the -v logs)
	line   []byte
	on     bool
	cpu    time.Duration
	cycles int
}

func (g *gcMeter) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.line = append(g.line, p...)
	for {
		i := bytes.IndexByte(g.line, '\n')
		if i < 0 {
			break
		}
		if d, ok := gcLineCPU(string(g.line[:i])); ok && g.on {
			g.cpu += d
			g.cycles++
		}
		g.line = g.line[i+1:]
	}
	if g.next != nil {
		return g.next.Write(p)
	}
	return len(p), nil
}

// start turns the meter on from zero.
func (g *gcMeter) start() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.on, g.cpu, g.cycles = true, 0, 0
}

// stop turns it off and returns the CPU and count of the collections it saw.
func (g *gcMeter) stop() (time.Duration, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.on = false
	return g.cpu, g.cycles
}

// gcLineCPU is the CPU of one gctrace line: the sum of the
// "a+b/c/d+e ms cpu" terms.
func gcLineCPU(line string) (time.Duration, bool) {
	if !strings.HasPrefix(line, "gc ") {
		return 0, false
	}
	end := strings.Index(line, " ms cpu")
	if end < 0 {
		return 0, false
	}
	terms := line[:end]
	terms = terms[strings.LastIndex(terms, " ")+1:]
	var ms float64
	for _, t := range strings.FieldsFunc(terms, func(r rune) bool { return r == '+' || r == '/' }) {
		v, err := strconv.ParseFloat(t, 64)
		if err != nil {
			return 0, false
		}
		ms += v
	}
	return time.Duration(ms * float64(time.Millisecond)), true
}
