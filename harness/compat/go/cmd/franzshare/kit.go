// Share-group (KIP-932) set-up for the franz-go share scenarios, the Go twin of the JVM driver's
// ShareKit: topics with their records, the group's configs set with IncrementalAlterConfigs on a
// GROUP resource and read back, ShareGroupDescribe, and the check that the share coordinator
// holds every record acknowledged (DescribeShareGroupOffsets, KIP-1226's lag).

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"onelog/compat/compat"
)

const (
	// poll is one poll's wait (Kit.POLL of the JVM drivers).
	poll = 200 * time.Millisecond
	// quiet is how long a consumer must then get nothing more: "a further poll round".
	quiet = 3 * time.Second
	// wait is how long a scenario waits for records it expects.
	wait = 40 * time.Second
	// minLockMs is the group's record lock duration where a scenario waits for one: Kafka 4.4's
	// minimum, group.share.min.record.lock.duration.ms.
	minLockMs = 15000
	// ackTimeout bounds one FlushAcks (commitSync(15 s) of the JVM driver).
	ackTimeout = 15 * time.Second
)

// topicName is a share scenario's topic: "<prefix>-share-<suffix>", as the JVM driver names
// them (kill-kafka.sh finds share_leader_kill's topic, "*-share-leader-kill", by that prefix).
func topicName(suffix string) string { return compat.Prefix + "-share-" + suffix }

// newClient is a plain client (admin, producer) with `opts` added.
func newClient(opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{kgo.SeedBrokers(compat.Bootstrap...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequestTimeoutOverhead(15 * time.Second)}
	return kgo.NewClient(append(base, opts...)...)
}

// numbered is "prefix0".."prefix(n-1)".
func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// createTopic creates `topic` (replication 3, 1 MiB segments) and produces `values` to it, value
// i to partition i mod partitions, key "k-<value>".
func createTopic(ctx context.Context, topic string, partitions int32, values []string) error {
	cl, err := newClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	seg := compat.SegmentBytes
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, 3, map[string]*string{"segment.bytes": &seg}, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return produce(ctx, cl, topic, partitions, values)
}

// produce writes values[i] to partition i mod partitions of topic and waits for every ack.
func produce(ctx context.Context, cl *kgo.Client, topic string, partitions int32, values []string) error {
	if len(values) == 0 {
		return nil
	}
	rs := make([]*kgo.Record, len(values))
	for i, v := range values {
		rs[i] = &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Key: []byte("k-" + v), Value: []byte(v)}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return fmt.Errorf("produce to %s: %w", topic, err)
	}
	return nil
}

// produceMore opens a producer for one more batch of values.
func produceMore(ctx context.Context, topic string, partitions int32, values []string) error {
	cl, err := newClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	return produce(ctx, cl, topic, partitions, values)
}

// alterGroupConfigs sends IncrementalAlterConfigs SET of keysAndValues on the GROUP resource
// `group` and answers the resource's error.
func alterGroupConfigs(ctx context.Context, cl *kgo.Client, group string, keysAndValues ...string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	for i := 0; i+1 < len(keysAndValues); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = keysAndValues[i], kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(keysAndValues[i+1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if len(resp.Resources) != 1 {
		return fmt.Errorf("IncrementalAlterConfigs answered %d resources", len(resp.Resources))
	}
	r := resp.Resources[0]
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return fmt.Errorf("%w (%s)", err, deref(r.ErrorMessage))
	}
	return nil
}

// groupConfigs sets the share group's configs (alternating keys and values) before any member
// joins, and waits until DescribeConfigs reads each one back: the change may reach the broker
// that answers a moment later (Kafka: the alter goes to the controller, the describe to any broker).
func groupConfigs(ctx context.Context, group string, keysAndValues ...string) error {
	cl, err := newClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := alterGroupConfigs(ctx, cl, group, keysAndValues...); err != nil {
		return fmt.Errorf("set group %s configs %v: %w", group, keysAndValues, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		stale, err := staleGroupConfigs(ctx, cl, group, keysAndValues)
		if err == nil && len(stale) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("group %s configs after 15 s: %v %v", group, stale, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// staleGroupConfigs describes the GROUP resource and lists each wanted config it does not read
// back.
func staleGroupConfigs(ctx context.Context, cl *kgo.Client, group string, keysAndValues []string) ([]string, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if len(resp.Resources) != 1 {
		return nil, fmt.Errorf("DescribeConfigs answered %d resources", len(resp.Resources))
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		return nil, err
	}
	got := map[string]string{}
	for _, c := range resp.Resources[0].Configs {
		got[c.Name] = deref(c.Value)
	}
	var stale []string
	for i := 0; i+1 < len(keysAndValues); i += 2 {
		if v, ok := got[keysAndValues[i]]; !ok || v != keysAndValues[i+1] {
			stale = append(stale, fmt.Sprintf("%s reads back as %q, set %s", keysAndValues[i], v, keysAndValues[i+1]))
		}
	}
	return stale, nil
}

// rejectedGroupConfig sets one group config out of its bounds: it must be refused with
// INVALID_CONFIG or INVALID_REQUEST (InvalidConfigurationException, InvalidRequestException).
// Answers the error.
func rejectedGroupConfig(ctx context.Context, group, key, value string) (error, error) {
	cl, err := newClient()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	refused := alterGroupConfigs(ctx, cl, group, key, value)
	switch {
	case refused == nil:
		return nil, fmt.Errorf("group config %s=%s was accepted (out of bounds)", key, value)
	case errors.Is(refused, kerr.InvalidConfig), errors.Is(refused, kerr.InvalidRequest):
		return refused, nil
	default:
		return nil, fmt.Errorf("%s=%s refused with %v, want INVALID_CONFIG or INVALID_REQUEST", key, value, refused)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// describeGroup answers ShareGroupDescribe of `group`.
func describeGroup(ctx context.Context, group string) (kadm.DescribedShareGroup, error) {
	cl, err := newClient()
	if err != nil {
		return kadm.DescribedShareGroup{}, err
	}
	defer cl.Close()
	described, err := kadm.NewClient(cl).DescribeShareGroups(ctx, group)
	if err != nil {
		return kadm.DescribedShareGroup{}, err
	}
	d := described[group]
	return d, d.Err
}

// shareOffsets answers DescribeShareGroupOffsets (ListShareGroupOffsets) of `group` for each
// partition of `topic`, named in the request as Admin.listShareGroupOffsets names them.
func shareOffsets(ctx context.Context, cl *kgo.Client, group, topic string, partitions int32) (map[int32]kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition, error) {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	g.GroupID = group
	t := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	t.Topic = topic
	for p := int32(0); p < partitions; p++ {
		t.Partitions = append(t.Partitions, p)
	}
	g.Topics = append(g.Topics, t)
	req.Groups = append(req.Groups, g)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[int32]kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition{}
	for _, rg := range resp.Groups {
		if err := kerr.ErrorForCode(rg.ErrorCode); err != nil {
			return nil, fmt.Errorf("DescribeShareGroupOffsets %s: %w", group, err)
		}
		for _, rt := range rg.Topics {
			for _, rp := range rt.Partitions {
				if rt.Topic == topic && rp.ErrorCode == 0 {
					out[rp.Partition] = rp
				}
			}
		}
	}
	return out, nil
}

// checkAllAcknowledged waits up to `timeout` until the share coordinator holds every record of
// every partition acknowledged or archived: DescribeShareGroupOffsets answers lag 0 (KIP-1226),
// or, from a broker that answers no lag (-1), a start offset at the log end offset. The start
// offset alone is no measure: Kafka 4.4 persists it one state write late. Answers
// "p0 start 0/9 lag 0, ..." for the detail.
func checkAllAcknowledged(ctx context.Context, group, topic string, partitions int32, timeout time.Duration) (string, error) {
	cl, err := newClient()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return "", fmt.Errorf("log end offsets of %s: %w", topic, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		shown, all, err := acknowledgedNow(ctx, cl, group, topic, partitions, ends)
		if err == nil && all {
			return shown, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the share group's offsets do not show every record acknowledged within %v: %s %v",
				timeout, shown, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// acknowledgedNow is one look of checkAllAcknowledged.
func acknowledgedNow(ctx context.Context, cl *kgo.Client, group, topic string, partitions int32, ends kadm.ListedOffsets) (string, bool, error) {
	start, err := shareOffsets(ctx, cl, group, topic, partitions)
	if err != nil {
		return "", false, err
	}
	var shown []string
	all := true
	for p := int32(0); p < partitions; p++ {
		end, _ := ends.Lookup(topic, p)
		info, ok := start[p]
		s, lag := int64(-1), int64(-1)
		if ok {
			s, lag = info.StartOffset, info.Lag
		}
		all = all && ok && (lag == 0 || lag < 0 && s == end.Offset)
		lagText := fmt.Sprintf(" lag %d", lag)
		if lag < 0 {
			lagText = " (no lag)"
		}
		shown = append(shown, fmt.Sprintf("p%d start %d/%d%s", p, s, end.Offset, lagText))
	}
	return strings.Join(shown, ", "), all, nil
}
