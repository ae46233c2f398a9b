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
	"sync"
	"sync/atomic"
	"time"
)

var Scenarios = []string{
	"create_topic", "produce_consume", "compression", "consume_earliest", "consume_latest",
	"seek_timestamp", "group_rebalance", "member_leave_rejoin", "idempotent_produce",
	"txn_commit_abort", "consume_process_produce", "txn_fencing", "alter_config", "delete_records",
	"leader_kill", "txn_leader_kill", "err_unknown_topic", "err_offset_out_of_range", "err_stale_generation",
	"err_fenced_producer",
}

// GroupProtocol is COMPAT_GROUP_PROTOCOL: "classic" (the default) or "consumer" (KIP-848), the
// protocol of every group consumer of the run. The runner sets it for the *-consumer client ids
// (franz-go-consumer); a driver that supports it names itself with ClientID.
var GroupProtocol = strings.ToLower(env("COMPAT_GROUP_PROTOCOL", "classic"))

// ConsumerProtocol tells the run's group consumers use the KIP-848 consumer group protocol.
var ConsumerProtocol = GroupProtocol == "consumer"

// ClientID is a driver's client id: base, or base + "-consumer" under the consumer protocol.
func ClientID(base string) string {
	if ConsumerProtocol {
		return base + "-consumer"
	}
	return base
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

// txn_leader_kill: transactions run for TxnBefore, then across COMPAT_KILL_LEADER, then
// TxnAfter more; each writes one record to each of TxnPartitions partitions. The kill starts
// while one transaction is held open with its records acknowledged (TxnHold before its commit),
// so it always lands inside an open transaction, never by chance between two. Every client step
// has TxnCall, so a slow election is waited out inside the client, not taken for an abort.
const (
	TxnBefore     = 2 * time.Second
	TxnHold       = time.Second
	TxnAfter      = 3 * time.Second
	TxnPartitions = 3
	TxnCall       = 60 * time.Second
)

// TxnValue is the value (and key) transaction seq writes to partition p.
func TxnValue(seq, p int) string { return fmt.Sprintf("tlk-%d-p%d", seq, p) }

// Committed is one committed transaction of txn_leader_kill.
type Committed struct {
	Seq          int
	Began, Done  time.Time
	CommitLasted time.Duration
}

// TxnRun is what a txn_leader_kill loop saw: the committed transactions, the first failure and
// when the kill began and ended.
type TxnRun struct {
	Committed            []Committed
	FailedSeq            int
	FailedAt             time.Time
	Failure              error
	KillBegan, KillEnded time.Time

	// HeldSeq is the transaction held open across the kill (-1 before one is).
	HeldSeq int

	mu         sync.Mutex
	currentSeq int
	currentAt  time.Time
	killWanted atomic.Bool
	holding    atomic.Bool
	held       chan struct{}
}

// Hold is called by a transaction once its records are acknowledged, before its commit: the
// first to get here once the kill is wanted stays open TxnHold, and the kill starts meanwhile.
func (r *TxnRun) Hold(seq int) {
	if r.killWanted.Load() && r.holding.CompareAndSwap(false, true) {
		r.mu.Lock()
		r.HeldSeq = seq
		r.mu.Unlock()
		close(r.held)
		time.Sleep(TxnHold)
	}
}

// OneTxn runs transaction seq (calling run.Hold(seq) once its records are acknowledged) and
// answers when its commit call started.
type OneTxn func(seq int, run *TxnRun) (commitStarted time.Time, err error)

// TxnLoopAcrossKill runs one transaction after another on a goroutine for TxnBefore, then
// COMPAT_KILL_LEADER, then TxnAfter; the loop stops at the first failed transaction.
func TxnLoopAcrossKill(ctx context.Context, one OneTxn) (*TxnRun, error) {
	run := &TxnRun{HeldSeq: -1, held: make(chan struct{})}
	started := time.Now()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for seq := 0; ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			began := time.Now()
			run.mu.Lock()
			run.currentSeq, run.currentAt = seq, began
			run.mu.Unlock()
			commitStarted, err := one(seq, run)
			now := time.Now()
			run.mu.Lock()
			if err != nil {
				run.FailedSeq, run.FailedAt, run.Failure = seq, now, err
				run.mu.Unlock()
				return
			}
			run.Committed = append(run.Committed, Committed{seq, began, now, now.Sub(commitStarted)})
			run.mu.Unlock()
		}
	}()
	time.Sleep(TxnBefore)
	run.killWanted.Store(true)
	select {
	case <-run.held:
	case <-done:
		close(stop)
		if run.Failure != nil {
			return nil, fmt.Errorf("transaction %d failed before the kill: %v", run.FailedSeq, run.Failure)
		}
		return nil, errors.New("the transaction loop ended before the kill")
	case <-time.After(TxnCall / 4):
		close(stop)
		run.mu.Lock()
		defer run.mu.Unlock()
		return nil, fmt.Errorf("no transaction got its records acknowledged in %v: transaction %d began %.1f s ago; %d committed",
			TxnCall/4, run.currentSeq, time.Since(run.currentAt).Seconds(), len(run.Committed))
	}
	run.KillBegan = time.Now()
	killErr := KillLeader(ctx)
	run.KillEnded = time.Now()
	time.Sleep(TxnAfter)
	close(stop)
	// Leave the reading-back a third of the scenario's budget.
	select {
	case <-done:
	case <-time.After(max(time.Second, Timeout*2/3-time.Since(started))):
		run.mu.Lock()
		defer run.mu.Unlock()
		return nil, fmt.Errorf("transaction %d stuck %.1f s after it began (%.1f s after the kill began); %s",
			run.currentSeq, time.Since(run.currentAt).Seconds(), time.Since(run.KillBegan).Seconds(), run.summaryLocked())
	}
	if killErr != nil {
		return nil, fmt.Errorf("COMPAT_KILL_LEADER: %w", killErr)
	}
	return run, nil
}

func (r *TxnRun) counts() (before, during, after int) {
	for _, c := range r.Committed {
		switch {
		case c.Done.Before(r.KillBegan):
			before++
		case c.Done.Before(r.KillEnded):
			during++
		default:
			after++
		}
	}
	return
}

// Summary counts the commits before, during and after the kill.
func (r *TxnRun) Summary() string { return r.summaryLocked() }

func (r *TxnRun) summaryLocked() string {
	before, during, after := r.counts()
	held := ""
	if r.HeldSeq >= 0 {
		held = fmt.Sprintf("; transaction %d held open across the kill", r.HeldSeq)
		for _, c := range r.Committed {
			if c.Seq == r.HeldSeq {
				held += fmt.Sprintf(", its commit took %d ms", c.CommitLasted.Milliseconds())
			}
		}
	}
	return fmt.Sprintf("%d committed: %d before the kill, %d during it (%.1f s), %d after%s",
		len(r.Committed), before, during, r.KillEnded.Sub(r.KillBegan).Seconds(), after, held)
}

// Check fails for a failed transaction step or for no commit before or after the kill.
func (r *TxnRun) Check() error {
	if r.Failure != nil {
		when := fmt.Sprintf("%.1f s after the kill began", r.FailedAt.Sub(r.KillBegan).Seconds())
		if r.FailedAt.Before(r.KillBegan) {
			when = fmt.Sprintf("%.1f s before the kill", r.KillBegan.Sub(r.FailedAt).Seconds())
		}
		return fmt.Errorf("transaction %d failed %s: %v; %s", r.FailedSeq, when, r.Failure, r.Summary())
	}
	before, _, after := r.counts()
	if r.HeldSeq < 0 {
		return fmt.Errorf("no transaction was held open across the kill; %s", r.Summary())
	}
	if before == 0 {
		return fmt.Errorf("no transaction committed before the kill; %s", r.Summary())
	}
	if after == 0 {
		return fmt.Errorf("no transaction committed after the kill; %s", r.Summary())
	}
	return nil
}

// Total is the number of records the committed transactions wrote.
func (r *TxnRun) Total() int { return len(r.Committed) * TxnPartitions }

// CheckRead takes the values read under read_committed per partition (in offset order): each
// committed transaction's record must be there once, in commit order, and nothing else.
func (r *TxnRun) CheckRead(byPartition map[int32][]string) (string, error) {
	var longest, longestCommit time.Duration
	for _, c := range r.Committed {
		longest = max(longest, c.Done.Sub(c.Began))
		longestCommit = max(longestCommit, c.CommitLasted)
	}
	for p := 0; p < TxnPartitions; p++ {
		want := make([]string, len(r.Committed))
		for i, c := range r.Committed {
			want[i] = TxnValue(c.Seq, p)
		}
		if err := ExactlyOnce(fmt.Sprintf("partition %d under read_committed", p), byPartition[int32(p)], want); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%s; all %d records read back once under read_committed; longest transaction %d ms (commit call %d ms)",
		r.Summary(), r.Total(), longest.Milliseconds(), longestCommit.Milliseconds()), nil
}

// ExactlyOnce fails unless have is exactly want (each value once, in order), counting what differs.
func ExactlyOnce(what string, have, want []string) error {
	if strings.Join(have, ",") == strings.Join(want, ",") && len(have) == len(want) {
		return nil
	}
	wanted := map[string]bool{}
	for _, v := range want {
		wanted[v] = true
	}
	seen := map[string]bool{}
	dups := 0
	var extra, missing []string
	for _, v := range have {
		if seen[v] {
			dups++
		}
		seen[v] = true
		if !wanted[v] {
			extra = append(extra, v)
		}
	}
	for _, v := range want {
		if !seen[v] {
			missing = append(missing, v)
		}
	}
	order := ""
	if len(missing) == 0 && dups == 0 && len(extra) == 0 {
		order = ", out of order"
	}
	return fmt.Errorf("%s: %d records, want %d; %d missing (e.g. %v), %d duplicated, %d unexpected (e.g. %v)%s",
		what, len(have), len(want), len(missing), missing[:min(3, len(missing))], dups, len(extra), extra[:min(3, len(extra))], order)
}

func emit(client, version, scenario, result, detail string) {
	line, _ := json.Marshal(map[string]string{"client": client, "version": version,
		"scenario": scenario, "result": result, "detail": detail})
	fmt.Println(string(line))
}

// budgets holds the scenarios given more than COMPAT_TIMEOUT_S (SetBudget).
var budgets = map[string]time.Duration{}

// SetBudget gives scenario id a budget of at least d instead of COMPAT_TIMEOUT_S: a scenario
// that waits out a record lock or a broker's kill and restart. Call it before Run.
func SetBudget(id string, d time.Duration) { budgets[id] = max(d, Timeout) }

func budgetOf(id string) time.Duration {
	if d, ok := budgets[id]; ok {
		return d
	}
	return Timeout
}

func outcome(s Scenario, budget time.Duration) (result, detail string) {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
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
	case <-time.After(budget + 5*time.Second):
		return "fail", fmt.Sprintf("scenario still running after %v", budget)
	}
}

// Run prints one line per scenario id (COMPAT_SCENARIOS may name a subset) and exits 0; impls
// holds one function per id, in the order of Scenarios.
func Run(client, version string, impls []Scenario) {
	RunList(client, version, Scenarios, impls)
}

// RunList is Run over another list of scenario ids (the security suite's).
func RunList(client, version string, ids []string, impls []Scenario) {
	if len(impls) != len(ids) {
		panic(fmt.Sprintf("%d scenario functions for %d scenario ids", len(impls), len(ids)))
	}
	only := map[string]bool{}
	for _, s := range strings.Split(os.Getenv("COMPAT_SCENARIOS"), ",") {
		if s != "" {
			only[s] = true
		}
	}
	for i, s := range ids {
		if len(only) > 0 && !only[s] {
			continue
		}
		started := time.Now()
		Log("[%s] %s ...", client, s)
		result, detail := outcome(impls[i], budgetOf(s))
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
