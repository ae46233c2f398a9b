// The share-group scenarios without faults (Queues.java of the JVM driver): implicit
// acknowledgement, the three acknowledgement types with their results, the delivery count limit
// archiving a record released over and over, and two members sharing a topic. Every check is
// exact: the records delivered, their delivery counts, each acknowledgement's outcome, and the
// group's share-group offsets at the end (every record acknowledged, lag 0). share_lock_expiry
// is in lock.go.

package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeImplicit is share_consume_implicit: 30 records on three partitions; one consumer that
// never acknowledges (franz-go accepts a poll's records at the next poll, KafkaShareConsumer's
// implicit mode) reads each exactly once with delivery count 1; a further poll round (whose
// first poll accepts the last batch) gets nothing; every acknowledgement result the callback
// reports succeeded; the group's offsets show every record acknowledged.
func consumeImplicit(ctx context.Context) (string, error) {
	topic := topicName("implicit")
	group := topic + "-g"
	const partitions = 3
	values := numbered("si", 30)
	if err := groupConfigs(ctx, group, "share.auto.offset.reset", "earliest"); err != nil {
		return "", err
	}
	if err := createTopic(ctx, topic, partitions, values); err != nil {
		return "", err
	}
	run, err := readImplicitly(ctx, group, topic, len(values))
	if err != nil {
		return "", err
	}
	if err := run.check(values); err != nil {
		return "", err
	}
	offsets, err := checkAllAcknowledged(ctx, group, topic, partitions, 15*time.Second)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d records on %d partitions delivered once each (delivery count 1) in %d polls, none in a further "+
		"%v; %d acknowledgement callbacks, no failed result; offsets %s", len(values), partitions, run.polls, quiet,
		run.callbacks, offsets), nil
}

type implicitRun struct {
	seen           map[string]int
	notFirst, more []string
	failedAcks     []string
	fetchErrs      []error
	polls          int
	callbacks      int
}

// readImplicitly polls until `want` distinct records arrived, then a quiet round, then FlushAcks.
func readImplicitly(ctx context.Context, group, topic string, want int) (*implicitRun, error) {
	m, err := newMember(group, topic, "implicit")
	if err != nil {
		return nil, err
	}
	defer m.close()
	run := &implicitRun{seen: map[string]int{}}
	deadline := time.Now().Add(wait)
	for len(run.seen) < want {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("read %d of %d records in %v", len(run.seen), want, wait)
		}
		for _, r := range m.poll(ctx, nil, 0) {
			run.seen[string(r.Value)]++
			if r.DeliveryCount() != 1 {
				run.notFirst = append(run.notFirst, fmt.Sprintf("%s dc %d", r.Value, r.DeliveryCount()))
			}
		}
		run.polls++
	}
	// The second round: its first poll accepts the last batch implicitly.
	for end := time.Now().Add(quiet); time.Now().Before(end); {
		for _, r := range m.poll(ctx, nil, 0) {
			run.more = append(run.more, string(r.Value))
		}
	}
	if _, err := m.flush(ctx, ackTimeout); err != nil {
		return nil, err
	}
	run.failedAcks, run.callbacks = m.ackErrors()
	run.fetchErrs = m.fatalFetchErrors()
	return run, nil
}

func (run *implicitRun) check(values []string) error {
	var dups []string
	for v, n := range run.seen {
		if n > 1 {
			dups = append(dups, fmt.Sprintf("%s x%d", v, n))
		}
	}
	got := slices.Sorted(maps.Keys(run.seen))
	want := slices.Sorted(slices.Values(values))
	switch {
	case len(run.fetchErrs) > 0:
		return fmt.Errorf("fetch errors: %v", run.fetchErrs)
	case len(dups) > 0:
		return fmt.Errorf("delivered more than once: %v", dups)
	case !slices.Equal(got, want):
		return fmt.Errorf("delivered %v, produced %v", got, want)
	case len(run.notFirst) > 0:
		return fmt.Errorf("first deliveries with a delivery count other than 1: %v", run.notFirst)
	case len(run.more) > 0:
		return fmt.Errorf("the second poll round got %d more records: %s", len(run.more), sample(run.more))
	case len(run.failedAcks) > 0:
		return fmt.Errorf("acknowledgements failed: %v", run.failedAcks)
	}
	return nil
}

// plan is share_explicit_ack's first acknowledgement of record i: accept, release or reject by i mod 3.
func plan(i int) kgo.AckStatus {
	return [...]kgo.AckStatus{kgo.AckAccept, kgo.AckRelease, kgo.AckReject}[i%3]
}

// index is i of "ea<i>".
func index(value string) int {
	i, _ := strconv.Atoi(strings.TrimLeft(value, "abcdefghijklmnopqrstuvwxyz"))
	return i
}

// explicitAck is share_explicit_ack: 12 records on one partition; on first delivery record i is
// accepted, released or rejected by i mod 3, every poll's acknowledgements flushed. The released
// come back exactly once more with delivery count 2 and are accepted then; the accepted and the
// rejected never come back; every result succeeds; the confirmed acknowledgements per offset are
// 1 (2 for the released); the group's offsets show all 12 acknowledged.
func explicitAck(ctx context.Context) (string, error) {
	topic := topicName("explicit")
	group := topic + "-g"
	values := numbered("ea", 12)
	if err := groupConfigs(ctx, group, "share.auto.offset.reset", "earliest"); err != nil {
		return "", err
	}
	if err := createTopic(ctx, topic, 1, values); err != nil {
		return "", err
	}
	l := newLedger()
	callbacks, err := runExplicit(ctx, group, topic, l, values)
	if err != nil {
		return "", err
	}
	if err := checkExplicit(l, values); err != nil {
		return "", err
	}
	offsets, err := checkAllAcknowledged(ctx, group, topic, 1, 15*time.Second)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("4 accepted, 4 released (back once with delivery count 2, then accepted), 4 rejected (never back); "+
		"every acknowledgement result without error (%d callbacks), each offset's acknowledgements confirmed (the released "+
		"twice), none in a further %v; offsets %s", callbacks, quiet, offsets), nil
}

// runExplicit acknowledges each record by plan on its first delivery, then ACCEPT, until done,
// then a quiet round. Answers how many acknowledgement callbacks ran.
func runExplicit(ctx context.Context, group, topic string, l *ledger, values []string) (int, error) {
	m, err := newMember(group, topic, "explicit")
	if err != nil {
		return 0, err
	}
	defer m.close()
	decide := func(r *kgo.Record) kgo.AckStatus {
		if len(l.of(string(r.Value))) == 1 {
			return plan(index(string(r.Value)))
		}
		return kgo.AckAccept
	}
	deadline := time.Now().Add(wait)
	for !explicitDone(l, values) {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("within %v: %d records delivered, %d deliveries: %v", wait, l.distinct(), l.total(), l)
		}
		if _, err := m.pollAck(ctx, l, 0, decide); err != nil {
			return 0, err
		}
	}
	for end := time.Now().Add(quiet); time.Now().Before(end); {
		if _, err := m.pollAck(ctx, l, 0, accept); err != nil {
			return 0, err
		}
	}
	failed, callbacks := m.ackErrors()
	if len(failed) > 0 {
		return 0, fmt.Errorf("the acknowledgement callback reported %v", failed)
	}
	if errs := m.fatalFetchErrors(); len(errs) > 0 {
		return 0, fmt.Errorf("fetch errors: %v", errs)
	}
	return callbacks, nil
}

func explicitDone(l *ledger, values []string) bool {
	for i, v := range values {
		want := 1
		if plan(i) == kgo.AckRelease {
			want = 2
		}
		if len(l.of(v)) < want || plan(i) == kgo.AckRelease && l.confirmedCount(v, kgo.AckAccept) == 0 {
			return false
		}
	}
	return true
}

func checkExplicit(l *ledger, values []string) error {
	if f := l.failures(); len(f) > 0 {
		return fmt.Errorf("acknowledgements failed: %v", f)
	}
	if a := l.afterFinals(); len(a) > 0 {
		return fmt.Errorf("delivered again after an accept or reject: %v", a)
	}
	gotOffsets, wantOffsets := map[int]int{}, map[int]int{}
	for i, v := range values {
		t := plan(i)
		want := []int32{1}
		if t == kgo.AckRelease {
			want = []int32{1, 2}
		}
		if !slices.Equal(l.of(v), want) {
			return fmt.Errorf("%s (%v) delivered with delivery counts %v, expected %v", v, t, l.of(v), want)
		}
		if l.confirmedCount(v, t) != 1 {
			return fmt.Errorf("%s: its %v not confirmed once", v, t)
		}
		if t == kgo.AckRelease && l.confirmedCount(v, kgo.AckAccept) != 1 {
			return fmt.Errorf("%s: its accept after the release not confirmed", v)
		}
		wantOffsets[i] = len(want)
		for _, s := range []kgo.AckStatus{kgo.AckAccept, kgo.AckRelease, kgo.AckReject} {
			gotOffsets[i] += l.confirmedCount(v, s)
		}
	}
	if !maps.Equal(gotOffsets, wantOffsets) {
		return fmt.Errorf("confirmed acknowledgements per offset (offset=times) %v, expected %v", gotOffsets, wantOffsets)
	}
	return nil
}

// rejectArchive is share_reject_archive: share.delivery.count.limit=1 must be refused (Kafka's
// minimum is 2); with 3, a record released on every delivery arrives exactly 3 times (delivery
// counts 1, 2, 3) and never again, a rejected one once, an accepted one once; a record produced
// afterwards still arrives (count 1), and the group's offsets show every record done.
func rejectArchive(ctx context.Context) (string, error) {
	topic := topicName("archive")
	group := topic + "-g"
	const limit = 3
	refused, err := rejectedGroupConfig(ctx, group, "share.delivery.count.limit", "1")
	if err != nil {
		return "", err
	}
	if err := groupConfigs(ctx, group, "share.auto.offset.reset", "earliest",
		"share.delivery.count.limit", strconv.Itoa(limit)); err != nil {
		return "", err
	}
	if err := createTopic(ctx, topic, 1, []string{"ra-release", "ra-reject", "ra-accept"}); err != nil {
		return "", err
	}
	l := newLedger()
	if err := runArchive(ctx, group, topic, l, limit); err != nil {
		return "", err
	}
	if err := checkArchive(l, limit); err != nil {
		return "", err
	}
	offsets, err := checkAllAcknowledged(ctx, group, topic, 1, 15*time.Second)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("delivery limit 1 refused (%v); limit %d: the released record arrived %d times (%v) then never, "+
		"the rejected once, the accepted once, a later record once; offsets %s", refused, limit, limit,
		l.of("ra-release"), offsets), nil
}

func archiveDecision(r *kgo.Record) kgo.AckStatus {
	switch v := string(r.Value); {
	case strings.HasSuffix(v, "release"):
		return kgo.AckRelease
	case strings.HasSuffix(v, "reject"):
		return kgo.AckReject
	default:
		return kgo.AckAccept
	}
}

// runArchive acknowledges by suffix until the released record reached the limit, waits a quiet
// round, then produces ra-after and reads it.
func runArchive(ctx context.Context, group, topic string, l *ledger, limit int) error {
	m, err := newMember(group, topic, "explicit")
	if err != nil {
		return err
	}
	defer m.close()
	deadline := time.Now().Add(wait)
	for len(l.of("ra-release")) < limit || len(l.of("ra-reject")) == 0 || len(l.of("ra-accept")) == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("within %v: deliveries %v", wait, l)
		}
		if _, err := m.pollAck(ctx, l, 0, archiveDecision); err != nil {
			return err
		}
	}
	for end := time.Now().Add(quiet); time.Now().Before(end); {
		if _, err := m.pollAck(ctx, l, 0, archiveDecision); err != nil {
			return err
		}
	}
	if err := produceMore(ctx, topic, 1, []string{"ra-after"}); err != nil {
		return err
	}
	deadline = time.Now().Add(wait)
	for len(l.of("ra-after")) == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("the record produced after the archived ones did not arrive in %v; deliveries %v", wait, l)
		}
		if _, err := m.pollAck(ctx, l, 0, archiveDecision); err != nil {
			return err
		}
	}
	if errs := m.fatalFetchErrors(); len(errs) > 0 {
		return fmt.Errorf("fetch errors: %v", errs)
	}
	return nil
}

func checkArchive(l *ledger, limit int) error {
	if f := l.failures(); len(f) > 0 {
		return fmt.Errorf("acknowledgements failed: %v", f)
	}
	var want []int32
	for i := 1; i <= limit; i++ {
		want = append(want, int32(i))
	}
	switch {
	case !slices.Equal(l.of("ra-release"), want):
		return fmt.Errorf("the released record arrived with delivery counts %v, expected %v (share.delivery.count.limit=%d)",
			l.of("ra-release"), want, limit)
	case l.confirmedCount("ra-release", kgo.AckRelease) != limit:
		return fmt.Errorf("its %d releases not all confirmed", limit)
	case !slices.Equal(l.of("ra-reject"), []int32{1}):
		return fmt.Errorf("the rejected record: delivery counts %v", l.of("ra-reject"))
	case l.confirmedCount("ra-reject", kgo.AckReject) != 1:
		return fmt.Errorf("the reject not confirmed")
	case !slices.Equal(l.of("ra-accept"), []int32{1}):
		return fmt.Errorf("the accepted record: delivery counts %v", l.of("ra-accept"))
	case !slices.Equal(l.of("ra-after"), []int32{1}):
		return fmt.Errorf("the later record: delivery counts %v", l.of("ra-after"))
	}
	return nil
}

// assignment is "<state> [0 1] [2 3]" of a described share group, for the detail.
func assignmentOf(members [][]int32, state string) string {
	var out []string
	for _, ps := range members {
		sorted := slices.Clone(ps)
		slices.Sort(sorted)
		out = append(out, fmt.Sprint(sorted))
	}
	sort.Strings(out)
	return state + " " + strings.Join(out, " ")
}
