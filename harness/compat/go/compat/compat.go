// Package compat is the compatibility-matrix contract for the Go drivers (franz-go, sarama):
// the scenario ids in matrix order, the runner's environment, the JSON-line printer and the
// expected records. A driver gives one function per scenario; Run prints a line for every id,
// turning errors and panics into `fail` and NotExpressible into `n/a`.
package compat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

var Scenarios = []string{
	"create_topic", "produce_consume", "compression", "consume_earliest", "consume_latest",
	"seek_timestamp", "group_rebalance", "member_leave_rejoin", "idempotent_produce",
	"txn_commit_abort", "consume_process_produce", "txn_fencing", "alter_config", "delete_records",
	"leader_kill", "err_unknown_topic", "err_offset_out_of_range", "err_stale_generation",
	"err_fenced_producer",
}

var (
	Bootstrap = strings.Split(env("COMPAT_BOOTSTRAP", "127.0.0.1:19092"), ",")
	Prefix    = env("COMPAT_PREFIX", fmt.Sprintf("compat-go-%d", os.Getpid()))
	Timeout   = time.Duration(envInt("COMPAT_TIMEOUT_S", 60)) * time.Second
)

// SegmentBytes is Kafka's minimum segment size, so test segments roll early (partitions no
// longer preallocate whole segments, so it no longer saves disk).
const SegmentBytes = "1048576"

// NotExpressible marks a scenario the client's API cannot express: the cell is n/a.
type NotExpressible struct{ Reason string }

func (n NotExpressible) Error() string { return n.Reason }

type Scenario func(ctx context.Context) (string, error)

func env(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

func envInt(k string, d int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return d
}

func Log(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// Name is a topic, group or transactional id unique to this run, client and scenario.
func Name(client, scenario, suffix string) string {
	return fmt.Sprintf("%s-%s-%s%s", Prefix, client, scenario, suffix)
}

// Record is one expected record: key, value and two headers.
type Record struct {
	Key, Value string
	Headers    [][2]string
}

func Records(n int, tag string) []Record {
	out := make([]Record, n)
	for i := range out {
		out[i] = Record{fmt.Sprintf("k-%s-%d", tag, i), fmt.Sprintf("v-%s-%d", tag, i),
			[][2]string{{"h1", fmt.Sprintf("a%d", i)}, {"h2", ""}}}
	}
	return out
}

func Values(n int, tag string) []string {
	out := make([]string, n)
	for i, r := range Records(n, tag) {
		out[i] = r.Value
	}
	return out
}

// Check answers an error when got and want differ (compared as JSON).
func Check(what string, got, want any) error {
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		return fmt.Errorf("%s: got %.300s, want %.300s", what, g, w)
	}
	return nil
}

// KillLeader runs COMPAT_KILL_LEADER: kill -9 the leader, wait for a new one, restart the node.
func KillLeader(ctx context.Context) error {
	cmd := os.Getenv("COMPAT_KILL_LEADER")
	if cmd == "" {
		return errors.New("COMPAT_KILL_LEADER is not set")
	}
	c := exec.CommandContext(ctx, "sh", "-c", cmd)
	c.Stdout, c.Stderr = os.Stderr, os.Stderr
	return c.Run()
}

// WaitFor polls cond every 100 ms until it holds or the budget ends.
func WaitFor(ctx context.Context, what string, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s (%v)", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

func emit(client, version, scenario, result, detail string) {
	line, _ := json.Marshal(map[string]string{"client": client, "version": version,
		"scenario": scenario, "result": result, "detail": detail})
	fmt.Println(string(line))
}

func outcome(s Scenario) (result, detail string) {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	done := make(chan [2]string, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- [2]string{"fail", fmt.Sprintf("panic: %v", p)}
			}
		}()
		d, err := s(ctx)
		var na NotExpressible
		switch {
		case errors.As(err, &na):
			done <- [2]string{"n/a", na.Reason}
		case err != nil:
			done <- [2]string{"fail", err.Error()}
		default:
			done <- [2]string{"pass", d}
		}
	}()
	select {
	case r := <-done:
		return r[0], r[1]
	case <-time.After(Timeout + 5*time.Second):
		return "fail", fmt.Sprintf("scenario still running after %v", Timeout)
	}
}

// Run prints one line per scenario id (COMPAT_SCENARIOS may name a subset) and exits 0; impls
// holds one function per id, in the order of Scenarios.
func Run(client, version string, impls []Scenario) {
	if len(impls) != len(Scenarios) {
		panic(fmt.Sprintf("%d scenario functions for %d scenario ids", len(impls), len(Scenarios)))
	}
	only := map[string]bool{}
	for _, s := range strings.Split(os.Getenv("COMPAT_SCENARIOS"), ",") {
		if s != "" {
			only[s] = true
		}
	}
	for i, s := range Scenarios {
		if len(only) > 0 && !only[s] {
			continue
		}
		started := time.Now()
		Log("[%s] %s ...", client, s)
		result, detail := outcome(impls[i])
		Log("[%s] %s: %s (%.1f s) %s", client, s, result, time.Since(started).Seconds(), detail)
		emit(client, version, s, result, detail)
	}
	os.Exit(0)
}

// ModuleVersion is the version of a module linked into this binary (from its build info).
func ModuleVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == path {
				return strings.TrimPrefix(m.Version, "v")
			}
		}
	}
	return "?"
}
