// share_lock_expiry (Queues.lockExpiry of the JVM driver): an acquisition lock running out under
// a live member that stopped polling. franz-go's holder fetches only while it polls
// (kgo.MaxConcurrentFetches(0)), so once it stops polling nothing of it acquires the records
// again, and its connections are kept open (kgo.ConnIdleTimeout) so that only the lock frees them.

package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// lockExpiry is share_lock_expiry: share.record.lock.duration.ms=14999 refused, 15000 set. A
// consumer acquires the 5 records in one poll (the lock its ShareFetch answered must be 15000
// ms), then stops polling but stays alive (heartbeats go on, nothing renews the locks). A second
// consumer gets none of them until 15 s after that poll began, then each held one with delivery
// count 2 (any the first did not get, with 1). While the second holds its first batch
// unacknowledged, the first's late ACCEPT must fail for the partition with
// INVALID_RECORD_STATE; the second's accepts all succeed.
func lockExpiry(ctx context.Context) (string, error) {
	topic := topicName("lock")
	group := topic + "-g"
	if _, err := rejectedGroupConfig(ctx, group, "share.record.lock.duration.ms", strconv.Itoa(minLockMs-1)); err != nil {
		return "", err
	}
	if err := groupConfigs(ctx, group, "share.auto.offset.reset", "earliest",
		"share.record.lock.duration.ms", strconv.Itoa(minLockMs)); err != nil {
		return "", err
	}
	values := numbered("le", 5)
	if err := createTopic(ctx, topic, 1, values); err != nil {
		return "", err
	}
	run := &lockRun{second: newLedger(), arrived: map[string]time.Time{}, heldSet: map[string]bool{}}
	if err := run.play(ctx, group, topic, len(values)); err != nil {
		return "", err
	}
	earliestMs, err := run.check(values)
	if err != nil {
		return "", err
	}
	offsets, err := checkAllAcknowledged(ctx, group, topic, 1, 15*time.Second)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("lock 14999 ms refused; lock %.0f ms (AcquisitionDeadline less the buffering time: %.1f ms): the %d "+
		"held reached the second consumer with delivery count 2, the first %d ms after the holder's poll began; the "+
		"holder's late accept failed with %v; offsets %s", math.Round(run.lockMs/1000)*1000, run.lockMs, len(run.held),
		earliestMs, run.lateErr, offsets), nil
}

type lockRun struct {
	held     []*kgo.Record
	heldSet  map[string]bool
	acquired time.Time
	lockMs   float64
	second   *ledger
	arrived  map[string]time.Time
	late     map[partitionKey]error
	lateErr  error
}

// play: the holder acquires, the second consumer waits for the records, the holder's late
// accept, then the second accepts everything and polls a quiet round.
func (run *lockRun) play(ctx context.Context, group, topic string, n int) error {
	a, err := newMember(group, topic, "holder", kgo.MaxConcurrentFetches(0), kgo.ConnIdleTimeout(2*time.Minute))
	if err != nil {
		return err
	}
	defer a.close()
	if err := run.acquire(ctx, a); err != nil {
		return err
	}
	b, err := newMember(group, topic, "second")
	if err != nil {
		return err
	}
	defer b.close()
	deadline := run.acquired.Add(minLockMs*time.Millisecond + wait)
	first, err := run.awaitSecond(ctx, b, deadline)
	if err != nil {
		return err
	}
	// The holder accepts what it held long ago, while the second holds some of it.
	if run.late, _, err = a.acknowledge(ctx, run.held, accept, ackTimeout); err != nil {
		return err
	}
	if err := b.ackAll(ctx, run.second, first, accept, ackTimeout); err != nil {
		return err
	}
	for len(run.arrived) < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("the second consumer got %d of %d within %v of the locks' expiry", len(run.arrived), n, wait)
		}
		rs, err := b.pollAck(ctx, run.second, 0, accept)
		if err != nil {
			return err
		}
		run.arrivedNow(rs)
	}
	for end := time.Now().Add(quiet); time.Now().Before(end); {
		if _, err := b.pollAck(ctx, run.second, 0, accept); err != nil {
			return err
		}
	}
	return nil
}

// acquire polls the holder until it gets records; `acquired` is when the poll that got them
// began, or when they were buffered if that was earlier (the holder fetches only while polling,
// so a response can land just after a poll ended and be taken by the next).
func (run *lockRun) acquire(ctx context.Context, a *member) error {
	deadline := time.Now().Add(wait)
	for len(run.held) == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("the first consumer acquired nothing in %v", wait)
		}
		run.acquired = time.Now()
		for _, r := range a.poll(ctx, nil, 0) {
			if r.DeliveryCount() != 1 {
				return fmt.Errorf("%s arrived first with delivery count %d", r.Value, r.DeliveryCount())
			}
			run.held = append(run.held, r)
			run.heldSet[string(r.Value)] = true
		}
	}
	a.mu.Lock()
	if at, ok := a.bufferedAt[run.held[0]]; ok && at.Before(run.acquired) {
		run.acquired = at
	}
	a.mu.Unlock()
	run.lockMs = a.lockMs(run.held[0])
	return nil
}

// awaitSecond polls the second consumer until its first records; answers them, unacknowledged.
func (run *lockRun) awaitSecond(ctx context.Context, b *member, deadline time.Time) ([]*kgo.Record, error) {
	for {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the second consumer got nothing within %v of the locks' expiry", wait)
		}
		if rs := b.poll(ctx, run.second, 0); len(rs) > 0 {
			run.arrivedNow(rs)
			return rs, nil
		}
	}
}

func (run *lockRun) arrivedNow(rs []*kgo.Record) {
	for _, r := range rs {
		if _, ok := run.arrived[string(r.Value)]; !ok {
			run.arrived[string(r.Value)] = time.Now()
		}
	}
}

// check answers how long after the holder's poll the first held record reached the second.
func (run *lockRun) check(values []string) (int64, error) {
	if run.lockMs > minLockMs+1 || math.Round(run.lockMs/1000)*1000 != minLockMs {
		return 0, fmt.Errorf("the holder's records carry a %.1f ms acquisition lock (AcquisitionDeadline less the buffering "+
			"time), want %d", run.lockMs, minLockMs)
	}
	if f := run.second.failures(); len(f) > 0 {
		return 0, fmt.Errorf("the second consumer's accepts failed: %v", f)
	}
	if a := run.second.afterFinals(); len(a) > 0 {
		return 0, fmt.Errorf("delivered again after an accept: %v", a)
	}
	earliestMs := int64(math.MaxInt64)
	for _, v := range values {
		want := []int32{1}
		if run.heldSet[v] {
			want = []int32{2}
		}
		if got := run.second.of(v); !slices.Equal(got, want) {
			return 0, fmt.Errorf("%s reached the second consumer with delivery counts %v, expected %v (held by the first: %v)",
				v, got, want, run.heldSet[v])
		}
		if run.second.confirmedCount(v, kgo.AckAccept) != 1 {
			return 0, fmt.Errorf("%s: the second consumer's accept not confirmed", v)
		}
		if !run.heldSet[v] {
			continue
		}
		afterMs := run.arrived[v].Sub(run.acquired).Milliseconds()
		earliestMs = min(earliestMs, afterMs)
		// The lock starts at the acquisition, after the poll began: it cannot run out before.
		if afterMs < minLockMs-250 {
			return 0, fmt.Errorf("%s reached the second consumer %d ms after the first consumer's poll began, before its %d ms "+
				"lock ran out", v, afterMs, minLockMs)
		}
	}
	return earliestMs, run.checkLate()
}

// checkLate: the holder's late accept must have failed for its one partition with
// INVALID_RECORD_STATE.
func (run *lockRun) checkLate() error {
	if len(run.late) != 1 {
		return fmt.Errorf("the first consumer's late accept gave results for %d partitions: %v", len(run.late), run.late)
	}
	for _, err := range run.late {
		run.lateErr = err
	}
	heldValues := make([]string, 0, len(run.held))
	for _, r := range run.held {
		heldValues = append(heldValues, string(r.Value))
	}
	logf("share_lock_expiry: held %v, lock %.1f ms; the holder's late accept: %v", heldValues, run.lockMs, run.lateErr)
	if !errors.Is(run.lateErr, kerr.InvalidRecordState) {
		return fmt.Errorf("the first consumer's late accept of records the second holds must fail with INVALID_RECORD_STATE; "+
			"got %v", run.lateErr)
	}
	return nil
}
