// Command franz is the compatibility-matrix driver for franz-go (kgo + kadm): every scenario of
// compat.Scenarios against COMPAT_BOOTSTRAP, one JSON line each. consume_process_produce runs
// two GroupTransactSessions on one group, the second joining mid-way (a rebalance in the
// middle of the transactional stream), and checks the output holds every input exactly once.
package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"onelog/compat/compat"
)

// client is franz-go, or franz-go-consumer when COMPAT_GROUP_PROTOCOL=consumer: then every group
// consumer opts into KIP-848 (groupOpts), and the group scenarios check with ConsumerGroupDescribe
// that the broker really holds a consumer-protocol group (kgo falls back to the classic protocol
// silently when the broker lacks ConsumerGroupHeartbeat v1).
var client = compat.ClientID("franz-go")

// groupOpts are the options of every group consumer: KIP-848's server-side assignment under the
// consumer protocol (kgo.ServerSideBalancer; it needs the range or sticky balancer first, and
// the default, cooperative-sticky, is one), nothing under the classic one. SessionTimeout is a
// classic setting: kgo ignores it under KIP-848 (the broker owns the session timeout).
func groupOpts() []kgo.Opt {
	if compat.ConsumerProtocol {
		return []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer())}
	}
	return nil
}

// checkGroupType answers an error unless the group is held by the protocol of the run: under the
// consumer protocol, ConsumerGroupDescribe must describe it with `members` members (a classic
// group answers GROUP_ID_NOT_FOUND there). Under the classic protocol it checks nothing.
func checkGroupType(ctx context.Context, group string, members int) error {
	if !compat.ConsumerProtocol {
		return nil
	}
	cl := newClient()
	defer cl.Close()
	described, err := kadm.NewClient(cl).DescribeConsumerGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("ConsumerGroupDescribe %s: %w", group, err)
	}
	d := described[group]
	if d.Err != nil {
		return fmt.Errorf("ConsumerGroupDescribe %s: %w (not a consumer-protocol group?)", group, d.Err)
	}
	if len(d.Members) != members {
		return fmt.Errorf("ConsumerGroupDescribe %s: %d members, want %d", group, len(d.Members), members)
	}
	return nil
}

func name(s, suffix string) string { return compat.Name(client, s, suffix) }

func newClient(opts ...kgo.Opt) *kgo.Client {
	base := append(securityOpts(compat.SASLPassword, true), kgo.SeedBrokers(compat.Bootstrap...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.FetchMaxWait(200*time.Millisecond))
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		panic(err)
	}
	return cl
}

func topic(ctx context.Context, s string, partitions int32, suffix string) (string, error) {
	t := name(s, suffix)
	cl := newClient()
	defer cl.Close()
	seg := compat.SegmentBytes
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, 3, map[string]*string{"segment.bytes": &seg}, t)
	if err == nil {
		err = resp.Error()
	}
	return t, err
}

func records(t string, recs []compat.Record, partition int32) []*kgo.Record {
	out := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		hs := make([]kgo.RecordHeader, len(r.Headers))
		for j, h := range r.Headers {
			hs[j] = kgo.RecordHeader{Key: h[0], Value: []byte(h[1])}
		}
		out[i] = &kgo.Record{Topic: t, Partition: partition, Key: []byte(r.Key), Value: []byte(r.Value), Headers: hs}
	}
	return out
}

func plain(rs []*kgo.Record) []compat.Record {
	out := make([]compat.Record, len(rs))
	for i, r := range rs {
		hs := make([][2]string, len(r.Headers))
		for j, h := range r.Headers {
			hs[j] = [2]string{h.Key, string(h.Value)}
		}
		out[i] = compat.Record{Key: string(r.Key), Value: string(r.Value), Headers: hs}
	}
	return out
}

func valuesOf(rs []*kgo.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Value)
	}
	return out
}

func produce(ctx context.Context, t string, recs []compat.Record, partition int32, opts ...kgo.Opt) error {
	cl := newClient(opts...)
	defer cl.Close()
	return cl.ProduceSync(ctx, records(t, recs, partition)...).FirstErr()
}

// poll reads n records from cl (failing on a fetch error), then 1 s more to see there are no others.
func poll(ctx context.Context, cl *kgo.Client, n int) ([]*kgo.Record, error) {
	var out []*kgo.Record
	var quiet time.Time
	for {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) && !errors.Is(e.Err, context.Canceled) {
				return out, fmt.Errorf("fetch %s[%d]: %w", e.Topic, e.Partition, e.Err)
			}
		}
		out = append(out, fs.Records()...)
		if len(out) >= n && quiet.IsZero() {
			quiet = time.Now().Add(time.Second)
		}
		if !quiet.IsZero() && time.Now().After(quiet) {
			return out, nil
		}
		if ctx.Err() != nil {
			return out, fmt.Errorf("read %d of %d: %w", len(out), n, ctx.Err())
		}
	}
}

func readPartition(ctx context.Context, t string, n int, opts ...kgo.Opt) ([]*kgo.Record, error) {
	at := map[string]map[int32]kgo.Offset{t: {0: kgo.NewOffset().AtStart()}}
	cl := newClient(append(opts, kgo.ConsumePartitions(at))...)
	defer cl.Close()
	return poll(ctx, cl, n)
}

func createTopic(ctx context.Context) (string, error) {
	t, err := topic(ctx, "create_topic", 3, "")
	if err != nil {
		return "", err
	}
	cl := newClient()
	defer cl.Close()
	// A node may answer Metadata before it applied the creation (Kafka's brokers lag the
	// controller the same way): wait until the topic shows its partitions.
	var d kadm.TopicDetail
	err = compat.WaitFor(ctx, "topic never showed 3 partitions", func() bool {
		md, err := kadm.NewClient(cl).ListTopics(ctx, t)
		d = md[t]
		return err == nil && len(d.Partitions) == 3
	})
	if err != nil {
		return "", err
	}
	if err := compat.Check("partitions", len(d.Partitions), 3); err != nil {
		return "", err
	}
	for _, p := range d.Partitions {
		if len(p.Replicas) != 3 {
			return "", fmt.Errorf("partition %d has %d replicas", p.Partition, len(p.Replicas))
		}
	}
	return "3 partitions, 3 replicas each", nil
}

func produceConsume(ctx context.Context) (string, error) {
	t, err := topic(ctx, "produce_consume", 1, "")
	if err != nil {
		return "", err
	}
	recs := compat.Records(20, "r")
	if err := produce(ctx, t, recs, 0); err != nil {
		return "", err
	}
	got, err := readPartition(ctx, t, 20)
	if err != nil {
		return "", err
	}
	return "20 records with keys and 2 headers exact", compat.Check("records", plain(got), recs)
}

func compression(ctx context.Context) (string, error) {
	codecs := map[string]kgo.CompressionCodec{"gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
	for _, c := range []string{"gzip", "snappy", "lz4", "zstd"} {
		t, err := topic(ctx, "compression", 1, "-"+c)
		if err != nil {
			return "", err
		}
		recs := compat.Records(50, c)
		if err := produce(ctx, t, recs, 0, kgo.ProducerBatchCompression(codecs[c])); err != nil {
			return "", err
		}
		got, err := readPartition(ctx, t, 50)
		if err == nil {
			err = compat.Check(c, plain(got), recs)
		}
		if err != nil {
			return "", err
		}
	}
	return "codecs: gzip,snappy,lz4,zstd", nil
}

func groupClient(t, group string, reset kgo.Offset, opts ...kgo.Opt) *kgo.Client {
	opts = append(opts, groupOpts()...)
	return newClient(append(opts, kgo.ConsumerGroup(group), kgo.ConsumeTopics(t), kgo.ConsumeResetOffset(reset),
		kgo.DisableAutoCommit(), kgo.SessionTimeout(10*time.Second))...)
}

func consumeEarliest(ctx context.Context) (string, error) {
	t, err := topic(ctx, "consume_earliest", 1, "")
	if err != nil {
		return "", err
	}
	recs := compat.Records(10, "r")
	if err := produce(ctx, t, recs, 0); err != nil {
		return "", err
	}
	cl := groupClient(t, name("consume_earliest", ""), kgo.NewOffset().AtStart())
	defer cl.Close()
	got, err := poll(ctx, cl, 10)
	if err != nil {
		return "", err
	}
	return "10 of 10 from a group without offsets", compat.Check("records", plain(got), recs)
}

// member is one group consumer with the partitions of its current assignment.
type member struct {
	cl       *kgo.Client
	mu       sync.Mutex
	assigned map[int32]bool
}

func (m *member) count() int { m.mu.Lock(); defer m.mu.Unlock(); return len(m.assigned) }

func (m *member) owns(p int32) bool { m.mu.Lock(); defer m.mu.Unlock(); return m.assigned[p] }

func join(t, group string, reset kgo.Offset) *member {
	m := &member{assigned: map[int32]bool{}}
	update := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.mu.Lock()
			for _, p := range ps[t] {
				if add {
					m.assigned[p] = true
				} else {
					delete(m.assigned, p)
				}
			}
			m.mu.Unlock()
		}
	}
	m.cl = groupClient(t, group, reset, kgo.OnPartitionsAssigned(update(true)),
		kgo.OnPartitionsRevoked(update(false)), kgo.OnPartitionsLost(update(false)))
	return m
}

// keepPolling polls the members in the background (group membership needs polls) until stop.
func keepPolling(ctx context.Context, ms []*member, onRecord func(*member, *kgo.Record)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func(m *member) {
			defer wg.Done()
			for ctx.Err() == nil {
				pctx, c := context.WithTimeout(ctx, 200*time.Millisecond)
				fs := m.cl.PollRecords(pctx, 1)
				c()
				fs.EachRecord(func(r *kgo.Record) { onRecord(m, r) })
			}
		}(m)
	}
	return func() { cancel(); wg.Wait() }
}

func shared(ms ...*member) func() bool {
	return func() bool {
		total := 0
		for _, m := range ms {
			if m.count() == 0 {
				return false
			}
			total += m.count()
		}
		return total == 3
	}
}

func consumeLatest(ctx context.Context) (string, error) {
	t, err := topic(ctx, "consume_latest", 1, "")
	if err != nil {
		return "", err
	}
	if err := produce(ctx, t, compat.Records(5, "old"), 0); err != nil {
		return "", err
	}
	m := join(t, name("consume_latest", ""), kgo.NewOffset().AtEnd())
	defer m.cl.Close()
	var mu sync.Mutex
	var got []*kgo.Record
	stop := keepPolling(ctx, []*member{m}, func(_ *member, r *kgo.Record) { mu.Lock(); got = append(got, r); mu.Unlock() })
	if err := compat.WaitFor(ctx, "never assigned", func() bool { return m.count() == 1 }); err != nil {
		stop()
		return "", err
	}
	time.Sleep(2 * time.Second) // the reset to the end happens on the first fetch
	fresh := compat.Records(5, "new")
	if err := produce(ctx, t, fresh, 0); err != nil {
		stop()
		return "", err
	}
	err = compat.WaitFor(ctx, "new records not read", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= 5 })
	time.Sleep(time.Second)
	stop()
	if err != nil {
		return "", err
	}
	return "only the 5 records produced after joining", compat.Check("records", plain(got), fresh)
}

func seekTimestamp(ctx context.Context) (string, error) {
	t, err := topic(ctx, "seek_timestamp", 1, "")
	if err != nil {
		return "", err
	}
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	rs := records(t, compat.Records(5, "r"), 0)
	for i, r := range rs {
		r.Timestamp = base.Add(time.Duration(i) * time.Second)
	}
	cl := newClient()
	defer cl.Close()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return "", err
	}
	listed, err := kadm.NewClient(cl).ListOffsetsAfterMilli(ctx, base.Add(2500*time.Millisecond).UnixMilli(), t)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return "", err
	}
	off := listed[t][0].Offset
	if err := compat.Check("offset for base+2.5s", off, int64(3)); err != nil {
		return "", err
	}
	rc := newClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{t: {0: kgo.NewOffset().At(off)}}))
	defer rc.Close()
	got, err := poll(ctx, rc, 1)
	if err != nil {
		return "", err
	}
	return "ListOffsetsAfterMilli -> 3, read v-r-3",
		compat.Check("record", []any{string(got[0].Value), got[0].Timestamp.UnixMilli()}, []any{"v-r-3", base.Add(3 * time.Second).UnixMilli()})
}

func groupRebalance(ctx context.Context) (string, error) {
	t, err := topic(ctx, "group_rebalance", 3, "")
	if err != nil {
		return "", err
	}
	group := name("group_rebalance", "")
	a := join(t, group, kgo.NewOffset().AtStart())
	var mu sync.Mutex
	var seen []string
	onRecord := func(m *member, r *kgo.Record) {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) >= 15 {
			return // not committed: the resumed consumer reads it
		}
		if err := m.cl.CommitRecords(ctx, r); err == nil {
			seen = append(seen, string(r.Value))
		}
	}
	stopA := keepPolling(ctx, []*member{a}, onRecord)
	if err := compat.WaitFor(ctx, "a never got 3 partitions", func() bool { return a.count() == 3 }); err != nil {
		stopA()
		return "", err
	}
	b := join(t, group, kgo.NewOffset().AtStart())
	stopB := keepPolling(ctx, []*member{b}, onRecord)
	err = compat.WaitFor(ctx, "the two never shared", shared(a, b))
	if err == nil {
		err = checkGroupType(ctx, group, 2)
	}
	sizes := []int{a.count(), b.count()}
	var all []string
	for p := int32(0); p < 3 && err == nil; p++ {
		recs := compat.Records(10, fmt.Sprintf("p%d", p))
		err = produce(ctx, t, recs, p)
		for _, r := range recs {
			all = append(all, r.Value)
		}
	}
	if err == nil {
		err = compat.WaitFor(ctx, "consumed fewer than 15", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) >= 15 })
	}
	stopA()
	stopB()
	a.cl.Close()
	b.cl.Close()
	if err != nil {
		return "", err
	}
	resumed := groupClient(t, group, kgo.NewOffset().AtStart())
	defer resumed.Close()
	rest, err := poll(ctx, resumed, 30-len(seen))
	if err != nil {
		return "", err
	}
	got := append(append([]string{}, seen...), valuesOf(rest)...)
	sort.Strings(got)
	sort.Strings(all)
	return fmt.Sprintf("assignment %v, %d committed then %d resumed", sizes, len(seen), len(rest)),
		compat.Check("records before and after the resume", got, all)
}

func memberLeaveRejoin(ctx context.Context) (string, error) {
	t, err := topic(ctx, "member_leave_rejoin", 3, "")
	if err != nil {
		return "", err
	}
	group := name("member_leave_rejoin", "")
	nop := func(*member, *kgo.Record) {}
	a, b := join(t, group, kgo.NewOffset().AtStart()), join(t, group, kgo.NewOffset().AtStart())
	defer a.cl.Close()
	stopA := keepPolling(ctx, []*member{a}, nop)
	defer stopA()
	stopB := keepPolling(ctx, []*member{b}, nop)
	if err := compat.WaitFor(ctx, "the two never shared", shared(a, b)); err != nil {
		stopB()
		return "", err
	}
	stopB()
	b.cl.Close()
	if err := compat.WaitFor(ctx, "a never got all 3 after b left", func() bool { return a.count() == 3 }); err != nil {
		return "", err
	}
	c := join(t, group, kgo.NewOffset().AtStart())
	defer c.cl.Close()
	stopC := keepPolling(ctx, []*member{c}, nop)
	defer stopC()
	if err := compat.WaitFor(ctx, "the rejoined member got nothing", shared(a, c)); err != nil {
		return "", err
	}
	if err := checkGroupType(ctx, group, 2); err != nil {
		return "", err
	}
	return fmt.Sprintf("after leave 3/3, after rejoin [%d %d]", a.count(), c.count()), nil
}

func idempotentProduce(ctx context.Context) (string, error) {
	t, err := topic(ctx, "idempotent_produce", 1, "")
	if err != nil {
		return "", err
	}
	recs := compat.Records(200, "r")
	if err := produce(ctx, t, recs, 0, kgo.RequiredAcks(kgo.AllISRAcks())); err != nil {
		return "", err
	}
	got, err := readPartition(ctx, t, 200)
	if err != nil {
		return "", err
	}
	return "200 records once, in order (franz-go is idempotent by default)", compat.Check("records", plain(got), recs)
}

func txnClient(id string, opts ...kgo.Opt) *kgo.Client {
	return newClient(append(opts, kgo.TransactionalID(id), kgo.TransactionTimeout(60*time.Second))...)
}

func txnCommitAbort(ctx context.Context) (string, error) {
	t, err := topic(ctx, "txn_commit_abort", 1, "")
	if err != nil {
		return "", err
	}
	cl := txnClient(name("txn_commit_abort", ""))
	defer cl.Close()
	for _, step := range []struct {
		tag    string
		n      int
		commit kgo.TransactionEndTry
	}{{"c1", 5, kgo.TryCommit}, {"a", 3, kgo.TryAbort}, {"c2", 5, kgo.TryCommit}} {
		if err := cl.BeginTransaction(); err != nil {
			return "", err
		}
		if err := cl.ProduceSync(ctx, records(t, compat.Records(step.n, step.tag), 0)...).FirstErr(); err != nil {
			return "", err
		}
		if err := cl.EndTransaction(ctx, step.commit); err != nil {
			return "", err
		}
	}
	rc, err := readPartition(ctx, t, 10, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err == nil {
		err = compat.Check("read_committed", valuesOf(rc), append(compat.Values(5, "c1"), compat.Values(5, "c2")...))
	}
	if err != nil {
		return "", err
	}
	ru, err := readPartition(ctx, t, 13, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if err != nil {
		return "", err
	}
	want := append(append(compat.Values(5, "c1"), compat.Values(3, "a")...), compat.Values(5, "c2")...)
	return "read_committed 10, read_uncommitted 13", compat.Check("read_uncommitted", valuesOf(ru), want)
}

// transactLoop runs one GroupTransactSession until done: poll, write out-<value>, End(commit).
func transactLoop(ctx context.Context, src, dst, group, id string, done func() bool, commits *int, mu *sync.Mutex) error {
	opts := append(securityOpts(compat.SASLPassword, true), kgo.SeedBrokers(compat.Bootstrap...), kgo.TransactionalID(id),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(src), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.SessionTimeout(10*time.Second), kgo.FetchMaxWait(200*time.Millisecond))
	s, err := kgo.NewGroupTransactSession(append(opts, groupOpts()...)...)
	if err != nil {
		return err
	}
	defer s.Close()
	for !done() && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fs := s.PollRecords(pctx, 4)
		cancel()
		if err := s.Begin(); err != nil {
			return err
		}
		fs.EachRecord(func(r *kgo.Record) {
			s.Produce(ctx, &kgo.Record{Topic: dst, Partition: 0, Key: r.Key, Value: append([]byte("out-"), r.Value...)}, nil)
		})
		committed, err := s.End(ctx, kgo.TryCommit)
		if err != nil {
			return err
		}
		if committed && len(fs.Records()) > 0 {
			mu.Lock()
			*commits++
			mu.Unlock()
		}
	}
	return nil
}

func consumeProcessProduce(ctx context.Context) (string, error) {
	src, err := topic(ctx, "consume_process_produce", 3, "-in")
	if err != nil {
		return "", err
	}
	dst, err := topic(ctx, "consume_process_produce", 1, "-out")
	if err != nil {
		return "", err
	}
	var want []string
	for p := int32(0); p < 3; p++ {
		recs := compat.Records(20, fmt.Sprintf("p%d", p))
		if err := produce(ctx, src, recs, p); err != nil {
			return "", err
		}
		for _, r := range recs {
			want = append(want, "out-"+r.Value)
		}
	}
	group := name("consume_process_produce", "")
	var mu sync.Mutex
	commits := 0
	cl := newClient()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	endReached := func() bool {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		total := int64(0)
		offs.Each(func(o kadm.OffsetResponse) { total += o.At })
		return total == 60
	}
	errs := make(chan error, 2)
	go func() {
		errs <- transactLoop(ctx, src, dst, group, name("consume_process_produce", "-a"), endReached, &commits, &mu)
	}()
	// The second session joins once the first has committed something: a rebalance mid-stream.
	if err := compat.WaitFor(ctx, "first session never committed", func() bool { mu.Lock(); defer mu.Unlock(); return commits > 0 }); err != nil {
		return "", err
	}
	go func() {
		errs <- transactLoop(ctx, src, dst, group, name("consume_process_produce", "-b"), endReached, &commits, &mu)
	}()
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			return "", err
		}
	}
	if !endReached() {
		return "", errors.New("committed offsets never reached the end of the input")
	}
	out, err := readPartition(ctx, dst, 60, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return "", err
	}
	got := valuesOf(out)
	sort.Strings(got)
	sort.Strings(want)
	return fmt.Sprintf("2 GroupTransactSessions with a rebalance, %d commits, 60 outputs exactly once, offsets at the end", commits),
		compat.Check("output", got, want)
}

// fencedPair: c1 opens a transaction, c2 with the same id starts one (fencing c1), c1 commits.
func fencedPair(ctx context.Context, s string) (string, *kgo.Client, *kgo.Client, error) {
	t, err := topic(ctx, s, 1, "")
	if err != nil {
		return "", nil, nil, err
	}
	c1, c2 := txnClient(name(s, "")), txnClient(name(s, ""))
	if err := c1.BeginTransaction(); err != nil {
		return "", c1, c2, err
	}
	if err := c1.ProduceSync(ctx, &kgo.Record{Topic: t, Value: []byte("from-p1")}).FirstErr(); err != nil {
		return "", c1, c2, err
	}
	if err := c2.BeginTransaction(); err != nil {
		return "", c1, c2, err
	}
	if err := c2.ProduceSync(ctx, &kgo.Record{Topic: t, Value: []byte("from-p2")}).FirstErr(); err != nil {
		return "", c1, c2, err
	}
	err = c1.EndTransaction(ctx, kgo.TryCommit)
	if err == nil {
		return "", c1, c2, errors.New("the fenced producer committed")
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		return "", c1, c2, fmt.Errorf("fencing error, got %w", err)
	}
	return t, c1, c2, err
}

func txnFencing(ctx context.Context) (string, error) {
	t, c1, c2, ferr := fencedPair(ctx, "txn_fencing")
	defer c1.Close()
	defer c2.Close()
	if t == "" {
		return "", ferr
	}
	if err := c2.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return "", err
	}
	got, err := readPartition(ctx, t, 1, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("p1 got %v; p2 committed", ferr), compat.Check("read_committed", valuesOf(got), []string{"from-p2"})
}

func errFencedProducer(ctx context.Context) (string, error) {
	t, c1, c2, ferr := fencedPair(ctx, "err_fenced_producer")
	defer c1.Close()
	defer c2.Close()
	if t == "" {
		return "", ferr
	}
	err := c1.BeginTransaction()
	if err == nil {
		err = c1.ProduceSync(ctx, &kgo.Record{Topic: t, Value: []byte("again")}).FirstErr()
	}
	if err == nil {
		err = c1.EndTransaction(ctx, kgo.TryCommit)
	}
	if err == nil {
		return "", errors.New("the fenced producer committed another transaction")
	}
	return fmt.Sprintf("%v; next transaction refused: %v", ferr, err), nil
}

func alterConfig(ctx context.Context) (string, error) {
	t, err := topic(ctx, "alter_config", 1, "")
	if err != nil {
		return "", err
	}
	cl := newClient()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	v := "3600000"
	resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &v}}, t)
	if err == nil {
		for _, r := range resp {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		return "", err
	}
	rc, err := adm.DescribeTopicConfigs(ctx, t)
	if err != nil {
		return "", err
	}
	c, err := rc.On(t, nil)
	if err != nil {
		return "", err
	}
	for _, e := range c.Configs {
		if e.Key == "retention.ms" {
			return "retention.ms=3600000 read back", compat.Check("retention.ms", e.MaybeValue(), v)
		}
	}
	return "", errors.New("retention.ms missing from DescribeConfigs")
}

func deleteRecords(ctx context.Context) (string, error) {
	t, err := topic(ctx, "delete_records", 1, "")
	if err != nil {
		return "", err
	}
	if err := produce(ctx, t, compat.Records(10, "r"), 0); err != nil {
		return "", err
	}
	cl := newClient()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: t, Partition: 0, At: 5})
	resp, err := adm.DeleteRecords(ctx, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return "", err
	}
	start, err := adm.ListStartOffsets(ctx, t)
	if err == nil {
		err = compat.Check("start offset", start[t][0].Offset, int64(5))
	}
	if err != nil {
		return "", err
	}
	got, err := readPartition(ctx, t, 5)
	if err != nil {
		return "", err
	}
	offsets := make([]int64, len(got))
	for i, r := range got {
		offsets[i] = r.Offset
	}
	return "start offset 5, earliest read starts at 5", compat.Check("offsets", offsets, []int64{5, 6, 7, 8, 9})
}

func leaderKill(ctx context.Context) (string, error) {
	t, err := topic(ctx, "leader_kill", 1, "")
	if err != nil {
		return "", err
	}
	cl := newClient(kgo.RequiredAcks(kgo.AllISRAcks()))
	defer cl.Close()
	var mu sync.Mutex
	var acked []string
	failed := 0
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprintf("lk-%d", i)
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: t, Value: []byte(v)}).FirstErr(); err != nil {
				failed++
				continue
			}
			mu.Lock()
			acked = append(acked, v)
			mu.Unlock()
		}
	}()
	time.Sleep(2 * time.Second)
	kerrRun := compat.KillLeader(ctx)
	time.Sleep(3 * time.Second)
	close(stop)
	<-done
	if kerrRun != nil {
		return "", kerrRun
	}
	if len(acked) == 0 {
		return "", errors.New("nothing acknowledged")
	}
	got, err := readPartition(ctx, t, len(acked))
	if err != nil {
		return "", err
	}
	have := map[string]bool{}
	for _, r := range got {
		have[string(r.Value)] = true
	}
	lost := 0
	for _, v := range acked {
		if !have[v] {
			lost++
		}
	}
	if lost > 0 {
		return "", fmt.Errorf("%d of %d acknowledged records lost", lost, len(acked))
	}
	return fmt.Sprintf("%d acked, all read back (%d failed sends)", len(acked), failed), nil
}

// txnLeaderKill: transactions (one record to each of 3 partitions, then commit) across a kill
// of the Raft leader; none may fail, and read_committed must give every committed one once.
func txnLeaderKill(ctx context.Context) (string, error) {
	t, err := topic(ctx, "txn_leader_kill", compat.TxnPartitions, "")
	if err != nil {
		return "", err
	}
	cl := txnClient(name("txn_leader_kill", ""), kgo.RetryTimeout(compat.TxnCall),
		kgo.RecordDeliveryTimeout(compat.TxnCall), kgo.RequiredAcks(kgo.AllISRAcks()))
	defer cl.Close()
	run, err := compat.TxnLoopAcrossKill(ctx, func(seq int, run *compat.TxnRun) (time.Time, error) {
		if err := cl.BeginTransaction(); err != nil {
			return time.Time{}, fmt.Errorf("begin: %w", err)
		}
		recs := make([]*kgo.Record, compat.TxnPartitions)
		for p := range recs {
			v := []byte(compat.TxnValue(seq, p))
			recs[p] = &kgo.Record{Topic: t, Partition: int32(p), Key: v, Value: v}
		}
		sctx, cancel := context.WithTimeout(ctx, compat.TxnCall)
		defer cancel()
		if err := cl.ProduceSync(sctx, recs...).FirstErr(); err != nil {
			return time.Time{}, fmt.Errorf("produce: %w", err)
		}
		run.Hold(seq)
		commitStarted := time.Now()
		if err := cl.EndTransaction(sctx, kgo.TryCommit); err != nil {
			return commitStarted, fmt.Errorf("commit after %d ms: %w", time.Since(commitStarted).Milliseconds(), err)
		}
		return commitStarted, nil
	})
	if err != nil {
		return "", err
	}
	if err := run.Check(); err != nil {
		return "", err
	}
	at := map[string]map[int32]kgo.Offset{t: {}}
	for p := int32(0); p < compat.TxnPartitions; p++ {
		at[t][p] = kgo.NewOffset().AtStart()
	}
	rd := newClient(kgo.ConsumePartitions(at), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer rd.Close()
	got, err := poll(ctx, rd, run.Total())
	if err != nil {
		return "", err
	}
	byPartition := map[int32][]string{}
	for _, r := range got {
		byPartition[r.Partition] = append(byPartition[r.Partition], string(r.Value))
	}
	return run.CheckRead(byPartition)
}

func errUnknownTopic(ctx context.Context) (string, error) {
	cl := newClient(kgo.UnknownTopicRetries(2))
	defer cl.Close()
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: name("err_unknown_topic", "-missing"), Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return "", fmt.Errorf("want UNKNOWN_TOPIC_OR_PARTITION, got %v", err)
	}
	return err.Error(), nil
}

func errOffsetOutOfRange(ctx context.Context) (string, error) {
	t, err := topic(ctx, "err_offset_out_of_range", 1, "")
	if err != nil {
		return "", err
	}
	if err := produce(ctx, t, compat.Records(5, "r"), 0); err != nil {
		return "", err
	}
	cl := newClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{t: {0: kgo.NewOffset().At(100)}}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if len(fs.Records()) > 0 {
			return "", errors.New("read a record past the end")
		}
		for _, e := range fs.Errors() {
			if errors.Is(e.Err, kerr.OffsetOutOfRange) {
				return e.Err.Error(), nil
			}
			return "", fmt.Errorf("want OFFSET_OUT_OF_RANGE, got %w", e.Err)
		}
	}
	return "", ctx.Err()
}

// errStaleGeneration: a commit from a member whose generation (classic) or member epoch (KIP-848)
// is stale after a rebalance. kgo never sends a stale one itself, so the OffsetCommit is built by
// hand with a's generation or epoch from before b joined. Classic: any stale commit fails
// (ILLEGAL_GENERATION, or UNKNOWN_MEMBER_ID / REBALANCE_IN_PROGRESS). Consumer protocol: the
// commit names a partition that moved to b and must fail with STALE_MEMBER_EPOCH; with KIP-1251
// (Kafka 4.3+) the same old epoch may still commit a partition a has held since then, which is
// checked too.
func errStaleGeneration(ctx context.Context) (string, error) {
	t, err := topic(ctx, "err_stale_generation", 2, "")
	if err != nil {
		return "", err
	}
	group := name("err_stale_generation", "")
	nop := func(*member, *kgo.Record) {}
	a := join(t, group, kgo.NewOffset().AtStart())
	defer a.cl.Close()
	stopA := keepPolling(ctx, []*member{a}, nop)
	defer stopA()
	if err := compat.WaitFor(ctx, "a never got 2 partitions", func() bool { return a.count() == 2 }); err != nil {
		return "", err
	}
	memberID, generation := a.cl.GroupMetadata()
	b := join(t, group, kgo.NewOffset().AtStart())
	defer b.cl.Close()
	stopB := keepPolling(ctx, []*member{b}, nop)
	defer stopB()
	if err := compat.WaitFor(ctx, "no rebalance", func() bool {
		_, g := a.cl.GroupMetadata()
		return g > generation && b.count() > 0 && a.count() > 0
	}); err != nil {
		return "", err
	}
	if err := checkGroupType(ctx, group, 2); err != nil {
		return "", err
	}
	topics, err := kadm.NewClient(a.cl).ListTopics(ctx, t)
	if err != nil {
		return "", err
	}
	// commit sends an OffsetCommit of offset 1 for partition p with a's old generation or epoch.
	// Topic and TopicID are both set: the version kgo negotiates (v9 names, v10+ ids) picks one.
	commit := func(p int32) (error, error) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation, req.MemberID = group, generation, memberID
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = t, topics[t].ID
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, a.cl)
		if err != nil {
			return nil, err
		}
		return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode), nil
	}
	if !compat.ConsumerProtocol {
		e, err := commit(0)
		if err != nil {
			return "", err
		}
		if !errors.Is(e, kerr.IllegalGeneration) && !errors.Is(e, kerr.UnknownMemberID) && !errors.Is(e, kerr.RebalanceInProgress) {
			return "", fmt.Errorf("stale-generation commit answered %v", e)
		}
		return fmt.Sprintf("OffsetCommit with generation %d after the rebalance: %v", generation, e), nil
	}
	var moved, kept int32 = -1, -1
	for p := int32(0); p < 2; p++ {
		if b.owns(p) && !a.owns(p) {
			moved = p
		}
		if a.owns(p) && !b.owns(p) {
			kept = p
		}
	}
	if moved < 0 || kept < 0 {
		return "", fmt.Errorf("after the rebalance a owns %v, b owns %v: want one partition each", a.assigned, b.assigned)
	}
	e, err := commit(moved)
	if err != nil {
		return "", err
	}
	if !errors.Is(e, kerr.StaleMemberEpoch) {
		return "", fmt.Errorf("OffsetCommit with old epoch %d for partition %d (moved to b) answered %v, want STALE_MEMBER_EPOCH", generation, moved, e)
	}
	e2, err := commit(kept)
	if err != nil {
		return "", err
	}
	if e2 != nil {
		return "", fmt.Errorf("OffsetCommit with old epoch %d for partition %d (a's since before) answered %v, want success (KIP-1251)", generation, kept, e2)
	}
	offsets, err := kadm.NewClient(a.cl).FetchOffsets(ctx, group)
	if err != nil {
		return "", err
	}
	if o, ok := offsets.Lookup(t, moved); ok && o.At == 1 {
		return "", fmt.Errorf("the stale commit of partition %d was stored", moved)
	}
	if o, ok := offsets.Lookup(t, kept); !ok || o.At != 1 {
		return "", fmt.Errorf("the KIP-1251 commit of partition %d was not stored: %+v", kept, o)
	}
	return fmt.Sprintf("OffsetCommit with old member epoch %d: partition %d (moved to b) %v, partition %d (still a's) stored (KIP-1251)",
		generation, moved, e, kept), nil
}

func main() {
	if compat.SecuritySuite {
		compat.RunList(client, compat.ModuleVersion("github.com/twmb/franz-go"), compat.SecurityScenarios, []compat.Scenario{
			secProduceConsume, secTxnAllowed, secTxnDenied, secBadCredentials,
		})
	}
	compat.Run(client, compat.ModuleVersion("github.com/twmb/franz-go"), []compat.Scenario{
		// In the order of compat.Scenarios.
		createTopic, produceConsume, compression, consumeEarliest, consumeLatest, seekTimestamp, groupRebalance, memberLeaveRejoin, idempotentProduce, txnCommitAbort, consumeProcessProduce, txnFencing, alterConfig, deleteRecords, leaderKill, txnLeaderKill, errUnknownTopic, errOffsetOutOfRange, errStaleGeneration, errFencedProducer,
	})
}
