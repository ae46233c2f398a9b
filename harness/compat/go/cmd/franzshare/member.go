// A franz-go share consumer (kgo.ShareGroup) with what the scenarios read from it: the
// per-partition acknowledgement results of its kgo.ShareAckCallback and when each record was
// buffered (for its acquisition lock). franz-go has no commitSync: Record.Ack / Client.MarkAcks
// queue acknowledgements, which go out in the background or on Client.FlushAcks, and the broker's
// per-partition outcomes (no offsets) reach only the callback. So a poll's acknowledgements are
// followed by FlushAcks, which returns once every pending one has had its callback, and a
// partition's results since the acknowledgements are the outcome of every record of that
// partition acknowledged then (an error in any of them fails all of them: the conservative side).
// "Implicit" mode is franz-go's default, the records of a poll accepted by the next poll;
// "explicit" mode is acknowledging every record before the next poll.

package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"onelog/compat/compat"
)

type member struct {
	cl   *kgo.Client
	name string

	mu         sync.Mutex
	results    []kgo.ShareAckResult // since the last takeResults
	all        []kgo.ShareAckResult // every result of the client's life
	callbacks  int
	bufferedAt map[*kgo.Record]time.Time
	fetchErrs  []error
}

// OnFetchRecordBuffered (kgo.HookFetchRecordBuffered) stamps each record as the client buffers it,
// right after decoding the ShareFetch response that set its AcquisitionDeadline.
func (m *member) OnFetchRecordBuffered(r *kgo.Record) {
	m.mu.Lock()
	m.bufferedAt[r] = time.Now()
	m.mu.Unlock()
}

func (m *member) onAcks(_ *kgo.Client, rs kgo.ShareAckResults) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.callbacks++
	m.results = append(m.results, rs...)
	m.all = append(m.all, rs...)
}

// newMember joins share group `group` subscribed to `topic`; `extra` adds options
// (kgo.ShareMaxRecords, kgo.ShareMaxRecordsStrict, kgo.MaxConcurrentFetches, ...).
func newMember(group, topic, name string, extra ...kgo.Opt) (*member, error) {
	m := &member{name: name, bufferedAt: map[*kgo.Record]time.Time{}}
	opts := []kgo.Opt{kgo.SeedBrokers(compat.Bootstrap...), kgo.ClientID(group + "-" + name),
		kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ShareAckCallback(m.onAcks), kgo.WithHooks(m),
		kgo.RequestTimeoutOverhead(15 * time.Second)}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("share consumer %s: %w", name, err)
	}
	m.cl = cl
	return m, nil
}

// close leaves the group (kgo releases what it holds unacknowledged).
func (m *member) close() { m.cl.Close() }

// poll is one poll of at most `max` records (0: all buffered), each recorded in `l` (nil: none).
// Fetch errors other than the poll's own deadline go to stderr and fetchErrors.
func (m *member) poll(ctx context.Context, l *ledger, max int) []*kgo.Record {
	pctx, cancel := context.WithTimeout(ctx, poll)
	fs := m.cl.PollRecords(pctx, max)
	cancel()
	for _, e := range fs.Errors() {
		if errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, context.Canceled) {
			continue
		}
		compat.Log("%s: fetch %s[%d]: %v", m.name, e.Topic, e.Partition, e.Err)
		m.mu.Lock()
		m.fetchErrs = append(m.fetchErrs, e.Err)
		m.mu.Unlock()
	}
	rs := fs.Records()
	if l != nil {
		for _, r := range rs {
			l.delivered(r)
		}
	}
	return rs
}

// fatalFetchErrors answers the fetch errors a client cannot retry (kerr's non-retriable codes;
// the JVM's poll throws them).
func (m *member) fatalFetchErrors() []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []error
	for _, e := range m.fetchErrs {
		var ke *kerr.Error
		if errors.As(e, &ke) && !ke.Retriable {
			out = append(out, e)
		}
	}
	return out
}

func (m *member) takeResults() []kgo.ShareAckResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.results
	m.results = nil
	return out
}

// ackErrors answers every failed result the callback has reported, and how many callbacks ran.
func (m *member) ackErrors() ([]string, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, r := range m.all {
		if r.Err != nil {
			out = append(out, fmt.Sprintf("%s[%d]: %v", r.Topic, r.Partition, r.Err))
		}
	}
	return out, m.callbacks
}

// flush is FlushAcks bounded by `timeout`: every acknowledgement queued so far sent and its
// callback run. Answers the results the callback got since the last takeResults.
func (m *member) flush(ctx context.Context, timeout time.Duration) ([]kgo.ShareAckResult, error) {
	fctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := m.cl.FlushAcks(fctx); err != nil {
		return nil, fmt.Errorf("%s: FlushAcks within %v: %w", m.name, timeout, err)
	}
	return m.takeResults(), nil
}

type partitionKey struct {
	topic     string
	partition int32
}

// acknowledge acknowledges each record as `decide` says (one MarkAcks per type), then flushes;
// answers each partition's outcome: its first failed result, nil when all succeeded, and an
// error for a partition the callback gave no result for.
func (m *member) acknowledge(ctx context.Context, rs []*kgo.Record, decide func(*kgo.Record) kgo.AckStatus,
	timeout time.Duration) (map[partitionKey]error, []kgo.AckStatus, error) {
	m.takeResults()
	types := make([]kgo.AckStatus, len(rs))
	byType := map[kgo.AckStatus][]*kgo.Record{}
	for i, r := range rs {
		types[i] = decide(r)
		byType[types[i]] = append(byType[types[i]], r)
	}
	for _, t := range []kgo.AckStatus{kgo.AckAccept, kgo.AckRelease, kgo.AckReject} {
		if len(byType[t]) > 0 {
			m.cl.MarkAcks(t, byType[t]...)
		}
	}
	results, err := m.flush(ctx, timeout)
	if err != nil {
		return nil, nil, err
	}
	out := map[partitionKey]error{}
	for _, r := range rs {
		out[partitionKey{r.Topic, r.Partition}] = fmt.Errorf("no acknowledgement result for partition %d (results %v)",
			r.Partition, results)
	}
	seen := map[partitionKey]bool{}
	for _, res := range results {
		k := partitionKey{res.Topic, res.Partition}
		if _, acked := out[k]; !acked {
			continue
		}
		if !seen[k] || res.Err != nil && out[k] == nil {
			out[k] = res.Err
		}
		seen[k] = true
	}
	return out, types, nil
}

// ackAll acknowledges the records of the last poll as `decide` says and records each one's
// outcome in `l` (pollAck and ackAll of the JVM driver's ShareKit).
func (m *member) ackAll(ctx context.Context, l *ledger, rs []*kgo.Record, decide func(*kgo.Record) kgo.AckStatus,
	timeout time.Duration) error {
	if len(rs) == 0 {
		return nil
	}
	outcomes, types, err := m.acknowledge(ctx, rs, decide, timeout)
	if err != nil {
		return err
	}
	for i, r := range rs {
		l.outcome(string(r.Value), types[i], outcomes[partitionKey{r.Topic, r.Partition}])
	}
	return nil
}

// pollAck is one poll whose records are acknowledged as `decide` says; answers the records.
func (m *member) pollAck(ctx context.Context, l *ledger, max int, decide func(*kgo.Record) kgo.AckStatus) ([]*kgo.Record, error) {
	rs := m.poll(ctx, l, max)
	return rs, m.ackAll(ctx, l, rs, decide, ackTimeout)
}

// lockMs estimates the acquisition lock the broker answered for r (AcquisitionLockTimeoutMs of
// its ShareFetch response): AcquisitionDeadline is the decoding time plus that lock, and the
// record was buffered right after the decoding. Answers -1 when r was not stamped.
func (m *member) lockMs(r *kgo.Record) float64 {
	m.mu.Lock()
	at, ok := m.bufferedAt[r]
	m.mu.Unlock()
	if !ok {
		return -1
	}
	return float64(r.AcquisitionDeadline().Sub(at).Microseconds()) / 1000
}

func accept(*kgo.Record) kgo.AckStatus { return kgo.AckAccept }
