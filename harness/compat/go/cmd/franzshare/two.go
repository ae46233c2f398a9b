// share_two_consumers (Queues.twoConsumers of the JVM driver): two members of one share group
// on a four-partition topic read every record exactly once between them.

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// twoConsumers is share_two_consumers: two explicit-mode consumers of one group; once
// ShareGroupDescribe shows both as members with assignments covering every partition, 200
// records are produced; between them they read each exactly once (delivery count 1), every
// accept confirmed, nothing more in a further poll round; each must have read some.
func twoConsumers(ctx context.Context) (string, error) {
	topic := topicName("two")
	group := topic + "-g"
	const partitions = 4
	if err := groupConfigs(ctx, group, "share.auto.offset.reset", "earliest"); err != nil {
		return "", err
	}
	if err := createTopic(ctx, topic, partitions, nil); err != nil {
		return "", err
	}
	values := numbered("tc", 200)
	all := newLedger()
	read := map[string]int{}
	assignment, err := runTwo(ctx, group, topic, partitions, all, values, read)
	if err != nil {
		return "", err
	}
	if f := all.failures(); len(f) > 0 {
		return "", fmt.Errorf("accepts failed: %v", f)
	}
	var wrong []string
	for _, v := range values {
		if d := all.of(v); len(d) != 1 || d[0] != 1 || all.confirmedCount(v, kgo.AckAccept) != 1 {
			wrong = append(wrong, fmt.Sprintf("%s %v", v, d))
		}
	}
	switch {
	case len(wrong) > 0:
		return "", fmt.Errorf("not delivered exactly once with delivery count 1 and accepted: %s", sample(wrong))
	case all.distinct() != len(values):
		return "", fmt.Errorf("delivered %d distinct records, produced %d", all.distinct(), len(values))
	case len(read) != 2:
		return "", fmt.Errorf("one consumer read every record (%v); assignment %s", read, assignment)
	}
	offsets, err := checkAllAcknowledged(ctx, group, topic, partitions, 15*time.Second)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d records read exactly once between the two %v, assignment %s; offsets %s",
		len(values), read, assignment, offsets), nil
}

// runTwo joins both consumers, waits for the group to settle, produces `values` and reads them
// between the two, counting each one's records in `read`. Answers the settled assignment.
func runTwo(ctx context.Context, group, topic string, partitions int32, all *ledger, values []string, read map[string]int) (string, error) {
	var both []*member
	for _, name := range []string{"c1", "c2"} {
		m, err := newMember(group, topic, name)
		if err != nil {
			return "", err
		}
		defer m.close()
		both = append(both, m)
	}
	assignment, err := settle(ctx, group, partitions, both, all)
	if err != nil {
		return "", err
	}
	if err := produceMore(ctx, topic, partitions, values); err != nil {
		return "", err
	}
	deadline := time.Now().Add(wait)
	for all.distinct() < len(values) {
		if time.Now().After(deadline) {
			return "", fmt.Errorf("read %d of %d in %v", all.distinct(), len(values), wait)
		}
		for _, m := range both {
			rs, err := m.pollAck(ctx, all, 0, accept)
			if err != nil {
				return "", err
			}
			if len(rs) > 0 {
				read[m.name] += len(rs)
			}
		}
	}
	for end := time.Now().Add(quiet); time.Now().Before(end); {
		for _, m := range both {
			if _, err := m.pollAck(ctx, all, 0, accept); err != nil {
				return "", err
			}
		}
	}
	return assignment, nil
}

// settle polls both consumers (nothing may arrive: nothing is produced yet) until the group
// describes both as members whose assignments cover every partition; answers the assignment.
func settle(ctx context.Context, group string, partitions int32, both []*member, all *ledger) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		for _, m := range both {
			rs, err := m.pollAck(ctx, all, 0, accept)
			if err != nil {
				return "", err
			}
			if len(rs) > 0 {
				return "", fmt.Errorf("a record arrived before any was produced")
			}
		}
		d, err := describeGroup(ctx, group)
		if err != nil {
			return "", fmt.Errorf("ShareGroupDescribe %s: %w", group, err)
		}
		union := map[int32]bool{}
		everyone := len(d.Members) == 2
		var members [][]int32
		for _, m := range d.Members {
			var ps []int32
			m.Assignment.Each(func(_ string, p int32) { union[p] = true; ps = append(ps, p) })
			everyone = everyone && len(ps) > 0
			members = append(members, ps)
		}
		assignment := assignmentOf(members, d.GroupState)
		if everyone && len(union) == int(partitions) {
			return assignment, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the group did not settle in %v: %s", wait, assignment)
		}
	}
}
