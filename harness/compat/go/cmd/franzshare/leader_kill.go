// share_leader_kill (ShareFaults.leaderKill of the JVM driver): the broker the share partitions
// depend on is killed -9 (COMPAT_KILL_LEADER: on onelog the Raft leader, on Kafka the leader of
// the topic's partition 0) while a consumer accepts records, one batch of partition 0 held
// acquired and unacknowledged across the kill: every record must end accepted exactly once.

package main

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"onelog/compat/compat"
)

// killFlush bounds one FlushAcks around the kill: kgo retries an acknowledgement to a dead
// broker (RequestRetries, up to about 20 s) before its callback reports the failure.
const killFlush = 60 * time.Second

// killRun is the state the consumer goroutine and the scenario share.
type killRun struct {
	l                              *ledger
	fast, stop, holdNext, killed   atomic.Bool
	holding, release, done         chan struct{}
	releaseOnce                    sync.Once
	mu                             sync.Mutex
	heldAcross                     []string
	crash                          error
	lastDelivery                   atomic.Int64 // UnixNano
	p0AfterKill                    atomic.Int32
	acceptedBefore, heldMs, killMs int64
}

func (k *killRun) crashed() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.crash
}

func (k *killRun) fail(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.crash == nil {
		k.crash = err
	}
}

func (k *killRun) letGo() { k.releaseOnce.Do(func() { close(k.release) }) }

// leaderKill is share_leader_kill: 1500 records on three partitions, produced first; one
// consumer accepts them (at most 10 a poll, ShareMaxRecordsStrict: record_limit, a flush after
// each poll), slowly until the kill command returns, then at full speed. The kill lands while
// the consumer holds a batch with records of partition 0 acquired and unacknowledged; it accepts
// that batch only once the kill -9 took effect. Every record must be delivered; no accept
// confirmed twice and no record delivered after its accept was confirmed; a record whose accept
// failed must come back and be accepted, unless the broker had applied it (then the offsets show
// it acknowledged); the offsets must show every record acknowledged, and records of partition 0
// must be accepted after the kill.
func leaderKill(ctx context.Context) (string, error) {
	topic := topicName("leader-kill")
	group := topic + "-g"
	const partitions = 3
	if err := groupConfigs(ctx, group, "share.auto.offset.reset", "earliest"); err != nil {
		return "", err
	}
	values := numbered("lk", 1500)
	if err := createTopic(ctx, topic, partitions, values); err != nil {
		return "", err
	}
	k := &killRun{l: newLedger(), holding: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
	k.lastDelivery.Store(time.Now().UnixNano())
	go k.consume(ctx, group, topic)
	err := k.drive(ctx, values)
	k.letGo()
	k.stop.Store(true)
	select {
	case <-k.done:
	case <-time.After(60 * time.Second):
	}
	if err != nil {
		return "", err
	}
	if err := k.crashed(); err != nil {
		return "", fmt.Errorf("the consumer failed: %w", err)
	}
	return k.verify(ctx, group, topic, partitions, values)
}

// consume is the consumer goroutine.
func (k *killRun) consume(ctx context.Context, group, topic string) {
	defer close(k.done)
	m, err := newMember(group, topic, "leader-kill", kgo.ShareMaxRecords(10), kgo.ShareMaxRecordsStrict())
	if err != nil {
		k.fail(err)
		return
	}
	defer m.close()
	for !k.stop.Load() {
		got := m.poll(ctx, k.l, 10)
		if len(got) > 0 {
			k.lastDelivery.Store(time.Now().UnixNano())
		}
		afterKill := k.killed.Load()
		if hasPartition0(got) && k.holdNext.CompareAndSwap(true, false) {
			k.hold(got)
		}
		started := time.Now()
		if err := m.ackAll(ctx, k.l, got, accept, killFlush); err != nil {
			k.fail(err)
			return
		}
		if flushed := time.Since(started).Milliseconds(); flushed > 5000 {
			logf("share_leader_kill: a flush took %d ms (batch of %d)", flushed, len(got))
		}
		if afterKill {
			for _, r := range got {
				if r.Partition == 0 && k.l.confirmedCount(string(r.Value), kgo.AckAccept) > 0 {
					k.p0AfterKill.Add(1)
				}
			}
		}
		if !k.fast.Load() && len(got) > 0 {
			time.Sleep(150 * time.Millisecond)
		}
	}
}

func hasPartition0(rs []*kgo.Record) bool {
	for _, r := range rs {
		if r.Partition == 0 {
			return true
		}
	}
	return false
}

// hold keeps the batch acquired and unacknowledged until the kill -9 took effect.
func (k *killRun) hold(got []*kgo.Record) {
	k.mu.Lock()
	for _, r := range got {
		k.heldAcross = append(k.heldAcross, fmt.Sprintf("%s@p%d", r.Value, r.Partition))
	}
	k.mu.Unlock()
	close(k.holding)
	<-k.release
}

// drive waits for 100 accepted records, has the next batch with partition 0 held, kills the
// leader, then waits until every record is accepted or nothing arrived for 20 s, and a quiet
// round.
func (k *killRun) drive(ctx context.Context, values []string) error {
	deadline := time.Now().Add(wait)
	for k.l.acceptedDistinct() < 100 {
		if err := k.crashed(); err != nil {
			return fmt.Errorf("the consumer failed before the kill: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d records accepted in %v before the kill", k.l.acceptedDistinct(), wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
	k.holdNext.Store(true)
	select {
	case <-k.holding:
	case <-k.done:
		return fmt.Errorf("the consumer failed before the kill: %v", k.crashed())
	case <-time.After(30 * time.Second):
		return fmt.Errorf("no batch with a record of partition 0 within 30 s")
	}
	k.acceptedBefore = int64(k.l.acceptedDistinct())
	killStart := time.Now()
	killedAt, err := compat.KillLeaderAt(ctx, func() { k.killed.Store(true); k.letGo() })
	k.heldMs = killedAt.Sub(killStart).Milliseconds()
	k.killMs = time.Since(killStart).Milliseconds()
	k.fast.Store(true)
	if err != nil {
		return err
	}
	return k.awaitAll(values)
}

// awaitAll waits until every record is accepted, or nothing has arrived for 20 s (some accept
// was applied although reported failed: verify checks), at most 90 s; then a quiet round.
func (k *killRun) awaitAll(values []string) error {
	deadline := time.Now().Add(90 * time.Second)
	for !k.l.allAccepted(values) && time.Since(time.Unix(0, k.lastDelivery.Load())) < 20*time.Second {
		if err := k.crashed(); err != nil {
			return fmt.Errorf("the consumer failed: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after the kill: %d of %d delivered within 90 s", k.l.distinct(), len(values))
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(quiet)
	return nil
}

// killTally is what verify reads from the ledger.
type killTally struct {
	lost, twice, unconfirmed, silent []string
	redelivered                      map[string]int
	maxCount                         int32
	errors                           map[string]int
}

// acceptPrefix and errorTail shorten a failed accept to its error's name for the tally.
var (
	acceptPrefix = regexp.MustCompile(`^accept: `)
	errorTail    = regexp.MustCompile(`^([A-Z_]+): .*$`)
)

func (k *killRun) tally(values []string) killTally {
	t := killTally{redelivered: map[string]int{}, errors: map[string]int{}}
	failed := k.l.failures()
	for _, v := range values {
		d := k.l.of(v)
		if len(d) == 0 {
			t.lost = append(t.lost, v)
		}
		if len(d) > 1 {
			t.redelivered[fmt.Sprint(d)]++
		}
		for _, c := range d {
			t.maxCount = max(t.maxCount, c)
		}
		accepts := k.l.confirmedCount(v, kgo.AckAccept)
		_, hasFailed := failed[v]
		switch {
		case accepts > 1:
			t.twice = append(t.twice, v)
		case accepts == 0 && len(d) > 0 && hasFailed:
			t.unconfirmed = append(t.unconfirmed, fmt.Sprintf("%s %v", v, d))
		case accepts == 0 && len(d) > 0:
			t.silent = append(t.silent, fmt.Sprintf("%s %v", v, d))
		}
	}
	for _, es := range failed {
		for _, e := range es {
			e = errorTail.ReplaceAllString(acceptPrefix.ReplaceAllString(e, ""), "$1")
			t.errors[e]++
		}
	}
	return t
}

func (k *killRun) verify(ctx context.Context, group, topic string, partitions int32, values []string) (string, error) {
	t := k.tally(values)
	redelivered := 0
	for _, n := range t.redelivered {
		redelivered += n
	}
	failed := k.l.failures()
	logf("share_leader_kill: held across the kill -9 %v; %d records redelivered, by delivery counts %v; %d records with a "+
		"failed accept: %v", k.heldAcross, redelivered, t.redelivered, len(failed), t.errors)
	for v, es := range failed {
		logf("share_leader_kill: failed accept %s %s deliveries %v: %v", v, k.l.whereOf(v), k.l.of(v), es)
	}
	switch {
	case len(t.lost) > 0:
		return "", fmt.Errorf("never delivered: %s", sample(t.lost))
	case len(t.twice) > 0:
		return "", fmt.Errorf("accepted (confirmed) more than once: %s", sample(t.twice))
	case len(k.l.afterFinals()) > 0:
		return "", fmt.Errorf("delivered again after its accept was confirmed: %s", sample(k.l.afterFinals()))
	case len(t.silent) > 0:
		return "", fmt.Errorf("delivered, never accepted and no failure reported: %s", sample(t.silent))
	case t.maxCount >= 5:
		// Kafka's default share.delivery.count.limit: a record delivered that often may have been archived.
		return "", fmt.Errorf("a record was delivered %d times (the default delivery limit is 5: archived?)", t.maxCount)
	}
	offsets, err := checkAllAcknowledged(ctx, group, topic, partitions, 30*time.Second)
	if err != nil {
		return "", err
	}
	if k.p0AfterKill.Load() == 0 {
		return "", fmt.Errorf("no record of partition 0 was accepted after the kill")
	}
	applied := ""
	if len(t.unconfirmed) > 0 {
		applied = fmt.Sprintf(", %d of them applied anyway (not redelivered)", len(t.unconfirmed))
	}
	return fmt.Sprintf("%d records each accepted once, none lost: %d before the kill, %d held unacknowledged across it "+
		"(accepted %d ms after the kill began), %d of partition 0 after it; kill+restart %d ms; %d redelivered (delivery "+
		"counts %v), %d accepts reported failed %v%s; offsets %s", len(values), k.acceptedBefore, len(k.heldAcross), k.heldMs,
		k.p0AfterKill.Load(), k.killMs, redelivered, t.redelivered, len(failed), t.errors, applied, offsets), nil
}
