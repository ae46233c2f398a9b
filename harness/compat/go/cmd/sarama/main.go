// Command sarama is the compatibility-matrix driver for IBM/sarama: every scenario of
// compat.Scenarios against COMPAT_BOOTSTRAP, one JSON line each. The client is configured for
// protocol version 3.0 (sarama picks request versions from Config.Version, not ApiVersions).
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"onelog/compat/compat"
)

const client = "sarama"

func name(s, suffix string) string { return compat.Name(client, s, suffix) }

func config() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V3_0_0_0
	c.ClientID = "onelog-compat"
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Consumer.Return.Errors = true
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.MaxWaitTime = 200 * time.Millisecond
	c.Metadata.AllowAutoTopicCreation = false
	secure(c)
	return c
}

// secure applies the environment's connection security (compat/security.go): TLS, and SASL
// PLAIN. SCRAM is not wired: sarama needs a SCRAM client implementation from another module
// (its examples use xdg-go/scram), which go.sum does not pin; a SCRAM setting panics here, so
// every cell fails saying why.
func secure(c *sarama.Config) {
	cfg, err := compat.TLSConfig(true)
	if err != nil {
		panic(err)
	}
	if cfg != nil {
		c.Net.TLS.Enable = true
		c.Net.TLS.Config = cfg
	}
	if compat.SASL {
		if compat.SASLMechanism != "PLAIN" {
			panic("sarama driver: SASL " + compat.SASLMechanism + " is not wired (PLAIN only)")
		}
		c.Net.SASL.Enable = true
		c.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		c.Net.SASL.User = compat.SASLUsername
		c.Net.SASL.Password = compat.SASLPassword
	}
}

func withAdmin[T any](fn func(sarama.ClusterAdmin) (T, error)) (T, error) {
	var zero T
	adm, err := sarama.NewClusterAdmin(compat.Bootstrap, config())
	if err != nil {
		return zero, err
	}
	defer adm.Close()
	return fn(adm)
}

func topic(s string, partitions int32, suffix string) (string, error) {
	t := name(s, suffix)
	seg := compat.SegmentBytes
	_, err := withAdmin(func(a sarama.ClusterAdmin) (any, error) {
		return nil, a.CreateTopic(t, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 3,
			ConfigEntries: map[string]*string{"segment.bytes": &seg}}, false)
	})
	return t, err
}

func messages(t string, recs []compat.Record, partition int32) []*sarama.ProducerMessage {
	out := make([]*sarama.ProducerMessage, len(recs))
	for i, r := range recs {
		hs := make([]sarama.RecordHeader, len(r.Headers))
		for j, h := range r.Headers {
			hs[j] = sarama.RecordHeader{Key: []byte(h[0]), Value: []byte(h[1])}
		}
		out[i] = &sarama.ProducerMessage{Topic: t, Partition: partition, Key: sarama.StringEncoder(r.Key),
			Value: sarama.StringEncoder(r.Value), Headers: hs}
	}
	return out
}

func produce(t string, recs []compat.Record, partition int32, tune func(*sarama.Config)) error {
	c := config()
	if tune != nil {
		tune(c)
	}
	p, err := sarama.NewSyncProducer(compat.Bootstrap, c)
	if err != nil {
		return err
	}
	defer p.Close()
	return p.SendMessages(messages(t, recs, partition))
}

func plain(ms []*sarama.ConsumerMessage) []compat.Record {
	out := make([]compat.Record, len(ms))
	for i, m := range ms {
		hs := make([][2]string, len(m.Headers))
		for j, h := range m.Headers {
			hs[j] = [2]string{string(h.Key), string(h.Value)}
		}
		out[i] = compat.Record{Key: string(m.Key), Value: string(m.Value), Headers: hs}
	}
	return out
}

func valuesOf(ms []*sarama.ConsumerMessage) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Value)
	}
	return out
}

// readPartition reads n messages of partition 0 from offset, then 1 s more to see no others.
func readPartition(ctx context.Context, t string, offset int64, n int, iso sarama.IsolationLevel) ([]*sarama.ConsumerMessage, error) {
	c := config()
	c.Consumer.IsolationLevel = iso
	cons, err := sarama.NewConsumer(compat.Bootstrap, c)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(t, 0, offset)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	var out []*sarama.ConsumerMessage
	var quiet <-chan time.Time
	for {
		select {
		case m := <-pc.Messages():
			out = append(out, m)
			if len(out) == n {
				quiet = time.After(time.Second)
			}
		case e := <-pc.Errors():
			return out, e
		case <-quiet:
			return out, nil
		case <-ctx.Done():
			return out, fmt.Errorf("read %d of %d: %w", len(out), n, ctx.Err())
		}
	}
}

func createTopic(context.Context) (string, error) {
	t, err := topic("create_topic", 3, "")
	if err != nil {
		return "", err
	}
	md, err := withAdmin(func(a sarama.ClusterAdmin) ([]*sarama.TopicMetadata, error) { return a.DescribeTopics([]string{t}) })
	if err != nil {
		return "", err
	}
	if err := compat.Check("partitions", len(md[0].Partitions), 3); err != nil {
		return "", err
	}
	for _, p := range md[0].Partitions {
		if len(p.Replicas) != 3 {
			return "", fmt.Errorf("partition %d has %d replicas", p.ID, len(p.Replicas))
		}
	}
	return "3 partitions, 3 replicas each", nil
}

func produceConsume(ctx context.Context) (string, error) {
	t, err := topic("produce_consume", 1, "")
	if err != nil {
		return "", err
	}
	recs := compat.Records(20, "r")
	if err := produce(t, recs, 0, nil); err != nil {
		return "", err
	}
	got, err := readPartition(ctx, t, sarama.OffsetOldest, 20, sarama.ReadUncommitted)
	if err != nil {
		return "", err
	}
	return "20 records with keys and 2 headers exact", compat.Check("records", plain(got), recs)
}

func compression(ctx context.Context) (string, error) {
	codecs := map[string]sarama.CompressionCodec{"gzip": sarama.CompressionGZIP, "snappy": sarama.CompressionSnappy,
		"lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD}
	for _, c := range []string{"gzip", "snappy", "lz4", "zstd"} {
		t, err := topic("compression", 1, "-"+c)
		if err != nil {
			return "", err
		}
		recs := compat.Records(50, c)
		if err := produce(t, recs, 0, func(cfg *sarama.Config) { cfg.Producer.Compression = codecs[c] }); err != nil {
			return "", err
		}
		got, err := readPartition(ctx, t, sarama.OffsetOldest, 50, sarama.ReadUncommitted)
		if err == nil {
			err = compat.Check(c, plain(got), recs)
		}
		if err != nil {
			return "", err
		}
	}
	return "codecs: gzip,snappy,lz4,zstd", nil
}

// member is one consumer-group member: Consume runs in a loop; each message goes to onMessage.
type member struct {
	group    sarama.ConsumerGroup
	mu       sync.Mutex
	assigned int
	session  sarama.ConsumerGroupSession
	stop     context.CancelFunc
	done     chan struct{}
	onMsg    func(*member, sarama.ConsumerGroupSession, *sarama.ConsumerMessage)
}

func (m *member) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.session, m.assigned = s, 0
	for _, ps := range s.Claims() {
		m.assigned += len(ps)
	}
	return nil
}

func (m *member) Cleanup(sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	m.assigned = 0
	m.mu.Unlock()
	return nil
}

func (m *member) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		if m.onMsg != nil {
			m.onMsg(m, s, msg)
		}
	}
	return nil
}

func (m *member) count() int { m.mu.Lock(); defer m.mu.Unlock(); return m.assigned }

func join(ctx context.Context, t, group string, initial int64, tune func(*sarama.Config),
	onMsg func(*member, sarama.ConsumerGroupSession, *sarama.ConsumerMessage)) (*member, error) {
	c := config()
	c.Consumer.Offsets.Initial = initial
	c.Consumer.Group.Session.Timeout = 10 * time.Second
	if tune != nil {
		tune(c)
	}
	g, err := sarama.NewConsumerGroup(compat.Bootstrap, group, c)
	if err != nil {
		return nil, err
	}
	m := &member{group: g, done: make(chan struct{}), onMsg: onMsg}
	cctx, cancel := context.WithCancel(ctx)
	m.stop = cancel
	go func() {
		defer close(m.done)
		for cctx.Err() == nil {
			if err := g.Consume(cctx, []string{t}, m); err != nil {
				compat.Log("[sarama] consume: %v", err)
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	go func() {
		for e := range g.Errors() {
			compat.Log("[sarama] group error: %v", e)
		}
	}()
	return m, nil
}

func (m *member) close() { m.stop(); <-m.done; m.group.Close() }

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

type collector struct {
	mu   sync.Mutex
	msgs []*sarama.ConsumerMessage
}

func (c *collector) add(_ *member, _ sarama.ConsumerGroupSession, m *sarama.ConsumerMessage) {
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	c.mu.Unlock()
}

func (c *collector) len() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.msgs) }

func consumeFromGroup(ctx context.Context, s string, initial int64, produceAfterJoin []compat.Record) (string, error) {
	t, err := topic(s, 1, "")
	if err != nil {
		return "", err
	}
	first := compat.Records(10, "r")
	if produceAfterJoin != nil {
		first = compat.Records(5, "old")
	}
	if err := produce(t, first, 0, nil); err != nil {
		return "", err
	}
	col := &collector{}
	m, err := join(ctx, t, name(s, ""), initial, nil, col.add)
	if err != nil {
		return "", err
	}
	defer m.close()
	want := first
	if produceAfterJoin != nil {
		if err := compat.WaitFor(ctx, "never assigned", func() bool { return m.count() == 1 }); err != nil {
			return "", err
		}
		time.Sleep(2 * time.Second)
		if err := produce(t, produceAfterJoin, 0, nil); err != nil {
			return "", err
		}
		want = produceAfterJoin
	}
	if err := compat.WaitFor(ctx, "records not read", func() bool { return col.len() >= len(want) }); err != nil {
		return "", err
	}
	time.Sleep(time.Second)
	col.mu.Lock()
	defer col.mu.Unlock()
	return fmt.Sprintf("%d records exact", len(want)), compat.Check("records", plain(col.msgs), want)
}

func consumeEarliest(ctx context.Context) (string, error) {
	return consumeFromGroup(ctx, "consume_earliest", sarama.OffsetOldest, nil)
}

func consumeLatest(ctx context.Context) (string, error) {
	d, err := consumeFromGroup(ctx, "consume_latest", sarama.OffsetNewest, compat.Records(5, "new"))
	return "only the records produced after joining: " + d, err
}

func seekTimestamp(ctx context.Context) (string, error) {
	t, err := topic("seek_timestamp", 1, "")
	if err != nil {
		return "", err
	}
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	ms := messages(t, compat.Records(5, "r"), 0)
	for i, m := range ms {
		m.Timestamp = base.Add(time.Duration(i) * time.Second)
	}
	p, err := sarama.NewSyncProducer(compat.Bootstrap, config())
	if err != nil {
		return "", err
	}
	err = p.SendMessages(ms)
	p.Close()
	if err != nil {
		return "", err
	}
	cl, err := sarama.NewClient(compat.Bootstrap, config())
	if err != nil {
		return "", err
	}
	defer cl.Close()
	off, err := cl.GetOffset(t, 0, base.Add(2500*time.Millisecond).UnixMilli())
	if err == nil {
		err = compat.Check("offset for base+2.5s", off, int64(3))
	}
	if err != nil {
		return "", err
	}
	got, err := readPartition(ctx, t, off, 2, sarama.ReadUncommitted)
	if err != nil {
		return "", err
	}
	return "GetOffset by time -> 3, read v-r-3", compat.Check("record",
		[]any{string(got[0].Value), got[0].Timestamp.UnixMilli()}, []any{"v-r-3", base.Add(3 * time.Second).UnixMilli()})
}

func groupRebalance(ctx context.Context) (string, error) {
	t, err := topic("group_rebalance", 3, "")
	if err != nil {
		return "", err
	}
	group := name("group_rebalance", "")
	var mu sync.Mutex
	var seen []string
	onMsg := func(_ *member, s sarama.ConsumerGroupSession, m *sarama.ConsumerMessage) {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) >= 15 {
			return // not committed: the resumed consumer reads it
		}
		s.MarkMessage(m, "")
		s.Commit()
		seen = append(seen, string(m.Value))
	}
	a, err := join(ctx, t, group, sarama.OffsetOldest, nil, onMsg)
	if err != nil {
		return "", err
	}
	if err := compat.WaitFor(ctx, "a never got 3 partitions", func() bool { return a.count() == 3 }); err != nil {
		a.close()
		return "", err
	}
	b, err := join(ctx, t, group, sarama.OffsetOldest, nil, onMsg)
	if err != nil {
		a.close()
		return "", err
	}
	err = compat.WaitFor(ctx, "the two never shared", shared(a, b))
	sizes := []int{a.count(), b.count()}
	var all []string
	for p := int32(0); p < 3 && err == nil; p++ {
		recs := compat.Records(10, fmt.Sprintf("p%d", p))
		err = produce(t, recs, p, nil)
		for _, r := range recs {
			all = append(all, r.Value)
		}
	}
	if err == nil {
		err = compat.WaitFor(ctx, "consumed fewer than 15", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) >= 15 })
	}
	a.close()
	b.close()
	if err != nil {
		return "", err
	}
	col := &collector{}
	resumed, err := join(ctx, t, group, sarama.OffsetOldest, nil, col.add)
	if err != nil {
		return "", err
	}
	err = compat.WaitFor(ctx, "resumed consumer read too little", func() bool { return col.len() >= 30-len(seen) })
	time.Sleep(2 * time.Second)
	resumed.close()
	if err != nil {
		return "", err
	}
	got := append(append([]string{}, seen...), valuesOf(col.msgs)...)
	sort.Strings(got)
	sort.Strings(all)
	return fmt.Sprintf("assignment %v, %d committed then %d resumed", sizes, len(seen), len(col.msgs)),
		compat.Check("records before and after the resume", got, all)
}

func memberLeaveRejoin(ctx context.Context) (string, error) {
	t, err := topic("member_leave_rejoin", 3, "")
	if err != nil {
		return "", err
	}
	group := name("member_leave_rejoin", "")
	a, err := join(ctx, t, group, sarama.OffsetOldest, nil, nil)
	if err != nil {
		return "", err
	}
	defer a.close()
	b, err := join(ctx, t, group, sarama.OffsetOldest, nil, nil)
	if err != nil {
		return "", err
	}
	if err := compat.WaitFor(ctx, "the two never shared", shared(a, b)); err != nil {
		b.close()
		return "", err
	}
	b.close()
	if err := compat.WaitFor(ctx, "a never got all 3 after b left", func() bool { return a.count() == 3 }); err != nil {
		return "", err
	}
	c, err := join(ctx, t, group, sarama.OffsetOldest, nil, nil)
	if err != nil {
		return "", err
	}
	defer c.close()
	if err := compat.WaitFor(ctx, "the rejoined member got nothing", shared(a, c)); err != nil {
		return "", err
	}
	return fmt.Sprintf("after leave 3/3, after rejoin [%d %d]", a.count(), c.count()), nil
}

func idempotent(c *sarama.Config) {
	c.Producer.Idempotent = true
	c.Net.MaxOpenRequests = 1
}

func idempotentProduce(ctx context.Context) (string, error) {
	t, err := topic("idempotent_produce", 1, "")
	if err != nil {
		return "", err
	}
	recs := compat.Records(200, "r")
	if err := produce(t, recs, 0, idempotent); err != nil {
		return "", err
	}
	got, err := readPartition(ctx, t, sarama.OffsetOldest, 200, sarama.ReadUncommitted)
	if err != nil {
		return "", err
	}
	return "200 records once, in order", compat.Check("records", plain(got), recs)
}

func txnProducer(id string) (sarama.SyncProducer, error) {
	c := config()
	idempotent(c)
	c.Producer.Transaction.ID = id
	c.Producer.Transaction.Retry.Max = 3
	return sarama.NewSyncProducer(compat.Bootstrap, c)
}

func txnCommitAbort(ctx context.Context) (string, error) {
	t, err := topic("txn_commit_abort", 1, "")
	if err != nil {
		return "", err
	}
	p, err := txnProducer(name("txn_commit_abort", ""))
	if err != nil {
		return "", err
	}
	defer p.Close()
	for _, step := range []struct {
		tag    string
		n      int
		commit bool
	}{{"c1", 5, true}, {"a", 3, false}, {"c2", 5, true}} {
		if err := p.BeginTxn(); err != nil {
			return "", err
		}
		if err := p.SendMessages(messages(t, compat.Records(step.n, step.tag), 0)); err != nil {
			return "", err
		}
		end := p.AbortTxn
		if step.commit {
			end = p.CommitTxn
		}
		if err := end(); err != nil {
			return "", err
		}
	}
	rc, err := readPartition(ctx, t, sarama.OffsetOldest, 10, sarama.ReadCommitted)
	if err == nil {
		err = compat.Check("read_committed", valuesOf(rc), append(compat.Values(5, "c1"), compat.Values(5, "c2")...))
	}
	if err != nil {
		return "", err
	}
	ru, err := readPartition(ctx, t, sarama.OffsetOldest, 13, sarama.ReadUncommitted)
	if err != nil {
		return "", err
	}
	want := append(append(compat.Values(5, "c1"), compat.Values(3, "a")...), compat.Values(5, "c2")...)
	return "read_committed 10, read_uncommitted 13", compat.Check("read_uncommitted", valuesOf(ru), want)
}

func consumeProcessProduce(ctx context.Context) (string, error) {
	src, err := topic("consume_process_produce", 1, "-in")
	if err != nil {
		return "", err
	}
	dst, err := topic("consume_process_produce", 1, "-out")
	if err != nil {
		return "", err
	}
	if err := produce(src, compat.Records(10, "r"), 0, nil); err != nil {
		return "", err
	}
	group := name("consume_process_produce", "")
	inputs, err := readPartition(ctx, src, sarama.OffsetOldest, 10, sarama.ReadCommitted)
	if err != nil {
		return "", err
	}
	p, err := txnProducer(name("consume_process_produce", ""))
	if err != nil {
		return "", err
	}
	defer p.Close()
	if err := p.BeginTxn(); err != nil {
		return "", err
	}
	var out []*sarama.ProducerMessage
	for _, m := range inputs {
		out = append(out, &sarama.ProducerMessage{Topic: dst, Partition: 0, Key: sarama.ByteEncoder(m.Key),
			Value: sarama.StringEncoder("out-" + string(m.Value))})
	}
	if err := p.SendMessages(out); err != nil {
		return "", err
	}
	offsets := map[string][]*sarama.PartitionOffsetMetadata{src: {{Partition: 0, Offset: 10}}}
	if err := p.AddOffsetsToTxn(offsets, group); err != nil {
		return "", err
	}
	if err := p.CommitTxn(); err != nil {
		return "", err
	}
	got, err := readPartition(ctx, dst, sarama.OffsetOldest, 10, sarama.ReadCommitted)
	if err != nil {
		return "", err
	}
	want := compat.Values(10, "r")
	for i := range want {
		want[i] = "out-" + want[i]
	}
	if err := compat.Check("output", valuesOf(got), want); err != nil {
		return "", err
	}
	committed, err := withAdmin(func(a sarama.ClusterAdmin) (*sarama.OffsetFetchResponse, error) {
		return a.ListConsumerGroupOffsets(group, map[string][]int32{src: {0}})
	})
	if err != nil {
		return "", err
	}
	return "10 outputs exact, committed offset 10", compat.Check("committed", committed.GetBlock(src, 0).Offset, int64(10))
}

func fencedPair(s string) (string, sarama.SyncProducer, sarama.SyncProducer, error) {
	t, err := topic(s, 1, "")
	if err != nil {
		return "", nil, nil, err
	}
	p1, err := txnProducer(name(s, ""))
	if err != nil {
		return "", nil, nil, err
	}
	if err := p1.BeginTxn(); err != nil {
		return "", p1, nil, err
	}
	if _, _, err := p1.SendMessage(&sarama.ProducerMessage{Topic: t, Value: sarama.StringEncoder("from-p1")}); err != nil {
		return "", p1, nil, err
	}
	p2, err := txnProducer(name(s, ""))
	if err != nil {
		return "", p1, nil, err
	}
	err = p1.CommitTxn()
	if err == nil {
		return "", p1, p2, errors.New("the fenced producer committed")
	}
	if !errors.Is(err, sarama.ErrProducerFenced) && !errors.Is(err, sarama.ErrInvalidProducerEpoch) {
		return "", p1, p2, fmt.Errorf("fencing error, got %w", err)
	}
	return t, p1, p2, err
}

func closeAll(ps ...sarama.SyncProducer) {
	for _, p := range ps {
		if p != nil {
			p.Close()
		}
	}
}

func txnFencing(ctx context.Context) (string, error) {
	t, p1, p2, ferr := fencedPair("txn_fencing")
	defer closeAll(p1, p2)
	if t == "" {
		return "", ferr
	}
	if err := p2.BeginTxn(); err != nil {
		return "", err
	}
	if _, _, err := p2.SendMessage(&sarama.ProducerMessage{Topic: t, Value: sarama.StringEncoder("from-p2")}); err != nil {
		return "", err
	}
	if err := p2.CommitTxn(); err != nil {
		return "", err
	}
	got, err := readPartition(ctx, t, sarama.OffsetOldest, 1, sarama.ReadCommitted)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("p1 got %v; p2 committed", ferr), compat.Check("read_committed", valuesOf(got), []string{"from-p2"})
}

func errFencedProducer(context.Context) (string, error) {
	t, p1, p2, ferr := fencedPair("err_fenced_producer")
	defer closeAll(p1, p2)
	if t == "" {
		return "", ferr
	}
	err := p1.BeginTxn()
	if err == nil {
		_, _, err = p1.SendMessage(&sarama.ProducerMessage{Topic: t, Value: sarama.StringEncoder("again")})
	}
	if err == nil {
		err = p1.CommitTxn()
	}
	if err == nil {
		return "", errors.New("the fenced producer committed another transaction")
	}
	return fmt.Sprintf("%v; next transaction refused: %v", ferr, err), nil
}

func alterConfig(context.Context) (string, error) {
	t, err := topic("alter_config", 1, "")
	if err != nil {
		return "", err
	}
	v := "3600000"
	entries, err := withAdmin(func(a sarama.ClusterAdmin) ([]sarama.ConfigEntry, error) {
		err := a.IncrementalAlterConfig(sarama.TopicResource, t, map[string]sarama.IncrementalAlterConfigsEntry{
			"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &v}}, false)
		if err != nil {
			return nil, err
		}
		return a.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: t, ConfigNames: []string{"retention.ms"}})
	})
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.Name == "retention.ms" {
			return "retention.ms=3600000 read back", compat.Check("retention.ms", e.Value, v)
		}
	}
	return "", errors.New("retention.ms missing from DescribeConfigs")
}

func deleteRecords(ctx context.Context) (string, error) {
	t, err := topic("delete_records", 1, "")
	if err != nil {
		return "", err
	}
	if err := produce(t, compat.Records(10, "r"), 0, nil); err != nil {
		return "", err
	}
	if _, err := withAdmin(func(a sarama.ClusterAdmin) (any, error) { return nil, a.DeleteRecords(t, map[int32]int64{0: 5}) }); err != nil {
		return "", err
	}
	cl, err := sarama.NewClient(compat.Bootstrap, config())
	if err != nil {
		return "", err
	}
	defer cl.Close()
	low, err := cl.GetOffset(t, 0, sarama.OffsetOldest)
	if err == nil {
		err = compat.Check("oldest offset", low, int64(5))
	}
	if err != nil {
		return "", err
	}
	got, err := readPartition(ctx, t, sarama.OffsetOldest, 5, sarama.ReadUncommitted)
	if err != nil {
		return "", err
	}
	offsets := make([]int64, len(got))
	for i, m := range got {
		offsets[i] = m.Offset
	}
	return "oldest offset 5, reading from oldest starts at 5", compat.Check("offsets", offsets, []int64{5, 6, 7, 8, 9})
}

func leaderKill(ctx context.Context) (string, error) {
	t, err := topic("leader_kill", 1, "")
	if err != nil {
		return "", err
	}
	c := config()
	idempotent(c)
	c.Producer.Retry.Max = 30
	c.Producer.Retry.Backoff = 200 * time.Millisecond
	p, err := sarama.NewSyncProducer(compat.Bootstrap, c)
	if err != nil {
		return "", err
	}
	defer p.Close()
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
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: t, Value: sarama.StringEncoder(v)}); err != nil {
				failed++
				continue
			}
			acked = append(acked, v)
		}
	}()
	time.Sleep(2 * time.Second)
	killErr := compat.KillLeader(ctx)
	time.Sleep(3 * time.Second)
	close(stop)
	<-done
	if killErr != nil {
		return "", killErr
	}
	if len(acked) == 0 {
		return "", errors.New("nothing acknowledged")
	}
	got, err := readPartition(ctx, t, sarama.OffsetOldest, len(acked), sarama.ReadUncommitted)
	if err != nil {
		return "", err
	}
	have := map[string]bool{}
	for _, m := range got {
		have[string(m.Value)] = true
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
	t, err := topic("txn_leader_kill", compat.TxnPartitions, "")
	if err != nil {
		return "", err
	}
	c := config()
	idempotent(c)
	c.Producer.Transaction.ID = name("txn_leader_kill", "")
	c.Producer.Transaction.Timeout = compat.TxnCall
	// Retries worth TxnCall for the transaction and produce steps: an election is waited out
	// inside sarama. Metadata keeps sarama's default retries: while the coordinator is not
	// available sarama looks up partition 0 of __transaction_state, which onelog does not
	// have, and a refresh of an unknown topic retries Metadata.Retry.Max times before the
	// transaction step retries at all (at 300 retries, a minute).
	retries := int(compat.TxnCall / (200 * time.Millisecond))
	c.Producer.Transaction.Retry.Max, c.Producer.Transaction.Retry.Backoff = retries, 200*time.Millisecond
	c.Producer.Retry.Max, c.Producer.Retry.Backoff = retries, 200*time.Millisecond
	p, err := sarama.NewSyncProducer(compat.Bootstrap, c)
	if err != nil {
		return "", err
	}
	defer p.Close()
	run, err := compat.TxnLoopAcrossKill(ctx, func(seq int, run *compat.TxnRun) (time.Time, error) {
		if err := p.BeginTxn(); err != nil {
			return time.Time{}, fmt.Errorf("begin: %w", err)
		}
		msgs := make([]*sarama.ProducerMessage, compat.TxnPartitions)
		for i := range msgs {
			v := sarama.StringEncoder(compat.TxnValue(seq, i))
			msgs[i] = &sarama.ProducerMessage{Topic: t, Partition: int32(i), Key: v, Value: v}
		}
		if err := p.SendMessages(msgs); err != nil {
			return time.Time{}, fmt.Errorf("send (transaction status %v): %w", p.TxnStatus(), err)
		}
		run.Hold(seq)
		commitStarted := time.Now()
		if err := p.CommitTxn(); err != nil {
			return commitStarted, fmt.Errorf("commit after %d ms (transaction status %v): %w",
				time.Since(commitStarted).Milliseconds(), p.TxnStatus(), err)
		}
		return commitStarted, nil
	})
	if err != nil {
		return "", err
	}
	if err := run.Check(); err != nil {
		return "", err
	}
	byPartition := map[int32][]string{}
	rc := config()
	rc.Consumer.IsolationLevel = sarama.ReadCommitted
	cons, err := sarama.NewConsumer(compat.Bootstrap, rc)
	if err != nil {
		return "", err
	}
	defer cons.Close()
	msgs := make(chan *sarama.ConsumerMessage)
	errs := make(chan error, compat.TxnPartitions)
	finished := make(chan struct{})
	defer close(finished)
	for i := int32(0); i < compat.TxnPartitions; i++ {
		pc, err := cons.ConsumePartition(t, i, sarama.OffsetOldest)
		if err != nil {
			return "", err
		}
		defer pc.Close()
		go func() {
			for {
				select {
				case m := <-pc.Messages():
					select {
					case msgs <- m:
					case <-finished:
						return
					}
				case e := <-pc.Errors():
					errs <- e
					return
				case <-finished:
					return
				}
			}
		}()
	}
	n, want := 0, run.Total()
	var quiet <-chan time.Time
	for {
		select {
		case m := <-msgs:
			byPartition[m.Partition] = append(byPartition[m.Partition], string(m.Value))
			if n++; n == want {
				quiet = time.After(time.Second)
			}
		case e := <-errs:
			return "", e
		case <-quiet:
			return run.CheckRead(byPartition)
		case <-ctx.Done():
			return "", fmt.Errorf("read %d of %d: %w", n, want, ctx.Err())
		}
	}
}

func errUnknownTopic(context.Context) (string, error) {
	c := config()
	c.Metadata.Retry.Max = 2
	c.Producer.Retry.Max = 2
	p, err := sarama.NewSyncProducer(compat.Bootstrap, c)
	if err != nil {
		return "", err
	}
	defer p.Close()
	_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: name("err_unknown_topic", "-missing"), Value: sarama.StringEncoder("x")})
	if !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		return "", fmt.Errorf("want UNKNOWN_TOPIC_OR_PARTITION, got %v", err)
	}
	return err.Error(), nil
}

func errOffsetOutOfRange(context.Context) (string, error) {
	t, err := topic("err_offset_out_of_range", 1, "")
	if err != nil {
		return "", err
	}
	if err := produce(t, compat.Records(5, "r"), 0, nil); err != nil {
		return "", err
	}
	cons, err := sarama.NewConsumer(compat.Bootstrap, config())
	if err != nil {
		return "", err
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(t, 0, 100)
	if err == nil {
		pc.Close()
		return "", errors.New("ConsumePartition at offset 100 of 5 succeeded")
	}
	if !errors.Is(err, sarama.ErrOffsetOutOfRange) {
		return "", fmt.Errorf("want OFFSET_OUT_OF_RANGE, got %w", err)
	}
	return "ConsumePartition(100): " + err.Error(), nil
}

func errStaleGeneration(ctx context.Context) (string, error) {
	t, err := topic("err_stale_generation", 2, "")
	if err != nil {
		return "", err
	}
	group := name("err_stale_generation", "")
	a, err := join(ctx, t, group, sarama.OffsetOldest, nil, nil)
	if err != nil {
		return "", err
	}
	defer a.close()
	if err := compat.WaitFor(ctx, "a never got 2 partitions", func() bool { return a.count() == 2 }); err != nil {
		return "", err
	}
	a.mu.Lock()
	memberID, generation := a.session.MemberID(), a.session.GenerationID()
	a.mu.Unlock()
	b, err := join(ctx, t, group, sarama.OffsetOldest, nil, nil)
	if err != nil {
		return "", err
	}
	defer b.close()
	if err := compat.WaitFor(ctx, "no rebalance", func() bool { return b.count() > 0 && a.count() > 0 }); err != nil {
		return "", err
	}
	// sarama commits only through its live session: an OffsetCommit with the generation a had
	// before the rebalance is sent to the coordinator by hand.
	cl, err := sarama.NewClient(compat.Bootstrap, config())
	if err != nil {
		return "", err
	}
	defer cl.Close()
	coord, err := cl.Coordinator(group)
	if err != nil {
		return "", err
	}
	req := &sarama.OffsetCommitRequest{Version: 2, ConsumerGroup: group, ConsumerGroupGeneration: generation, ConsumerID: memberID,
		RetentionTime: -1}
	req.AddBlock(t, 0, 1, 0, "")
	resp, err := coord.CommitOffset(req)
	if err != nil {
		return "", err
	}
	kerr := resp.Errors[t][0]
	if kerr != sarama.ErrIllegalGeneration && kerr != sarama.ErrUnknownMemberId && kerr != sarama.ErrRebalanceInProgress {
		return "", fmt.Errorf("stale-generation commit answered %v", kerr)
	}
	return fmt.Sprintf("OffsetCommit with generation %d after the rebalance: %v", generation, kerr), nil
}

func main() {
	// COMPAT_DEBUG (any value): sarama's own log on stderr, for a scenario that hangs.
	if os.Getenv("COMPAT_DEBUG") != "" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags|log.Lmicroseconds)
	}
	compat.Run(client, compat.ModuleVersion("github.com/IBM/sarama"), []compat.Scenario{
		// In the order of compat.Scenarios.
		createTopic, produceConsume, compression, consumeEarliest, consumeLatest, seekTimestamp, groupRebalance, memberLeaveRejoin, idempotentProduce, txnCommitAbort, consumeProcessProduce, txnFencing, alterConfig, deleteRecords, leaderKill, txnLeaderKill, errUnknownTopic, errOffsetOutOfRange, errStaleGeneration, errFencedProducer,
	})
}
