// share_member_kill (ShareFaults.memberKill and ShareMember of the JVM driver): a share consumer
// in a child process (this binary run as `franzshare member TOPIC GROUP MAX`) acquires records
// and is killed -9 while it holds them; a consumer started after the kill must get every one.

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// runMember is the child: it joins the share group, acquires at most `max` records
// (ShareMaxRecords with ShareMaxRecordsStrict: record_limit, and fetching only while polling) in
// one poll that returns some, prints them and then holds them: no acknowledgement, no poll, no
// close, until it is killed. stdout, one line each:
//
//	record PARTITION OFFSET DELIVERY_COUNT VALUE   every record it acquired
//	held N                                         then, once
//	error TEXT                                     a failure; the process then exits 1
func runMember(args []string) int {
	if len(args) < 3 {
		fmt.Println("error usage: franzshare member <topic> <group> <max records>")
		return 2
	}
	max, err := strconv.Atoi(args[2])
	if err != nil {
		fmt.Println("error max records:", err)
		return 2
	}
	m, err := newMember(args[1], args[0], "member", kgo.ShareMaxRecords(int32(max)), kgo.ShareMaxRecordsStrict())
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	deadline := time.Now().Add(60 * time.Second)
	var got []*kgo.Record
	for len(got) == 0 {
		if time.Now().After(deadline) {
			fmt.Println("error no record in 60 s")
			return 1
		}
		got = m.poll(context.Background(), nil, max)
	}
	for _, r := range got {
		fmt.Printf("record %d %d %d %s\n", r.Partition, r.Offset, r.DeliveryCount(), r.Value)
	}
	fmt.Printf("held %d\n", len(got))
	select {} // holds them until the kill -9
}

// memberKill is share_member_kill: 20 records on one partition; the child acquires some (at
// most 5) and is killed -9 (its connections die with it; its member stays in the group until the
// session timeout). A consumer started after the kill must then get every record: the held ones
// again with a delivery count of at least 2, the others with 1 (or 2: fetched ahead by the
// child); each accepted exactly once, nothing more in a further poll round, and the group's
// offsets showing every record acknowledged. The group's lock is 15 s, so a broker that frees
// the records only when the lock runs out still passes in time; the detail says how long it took.
func memberKill(ctx context.Context) (string, error) {
	topic := topicName("member-kill")
	group := topic + "-g"
	if err := groupConfigs(ctx, group, "share.auto.offset.reset", "earliest",
		"share.record.lock.duration.ms", strconv.Itoa(minLockMs)); err != nil {
		return "", err
	}
	values := numbered("mk", 20)
	if err := createTopic(ctx, topic, 1, values); err != nil {
		return "", err
	}
	held, killedAt, err := holdAndKill(topic, group)
	if err != nil {
		return "", err
	}
	l := newLedger()
	back, err := readAfterKill(ctx, group, topic, l, values, held, killedAt)
	if err != nil {
		return "", err
	}
	return checkAfterKill(ctx, group, topic, l, values, held, back)
}

// holdAndKill starts the child, reads what it holds, and kill -9s it (also when it failed);
// answers the held values with their delivery counts and when the child was dead.
func holdAndKill(topic, group string) (map[string]int32, time.Time, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, time.Time{}, err
	}
	child := exec.Command(exe, "member", topic, group, "5")
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		return nil, time.Time{}, err
	}
	if err := child.Start(); err != nil {
		return nil, time.Time{}, err
	}
	held, readErr := readHeld(out)
	// kill -9 (SIGKILL).
	_ = child.Process.Kill()
	waited := make(chan error, 1)
	go func() { waited <- child.Wait() }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
	}
	killedAt := time.Now()
	if readErr != nil {
		return nil, killedAt, readErr
	}
	for v, dc := range held {
		if dc != 1 {
			return nil, killedAt, fmt.Errorf("the child got %s with delivery count %d", v, dc)
		}
	}
	return held, killedAt, nil
}

// readHeld reads the child's lines until "held N".
func readHeld(out io.Reader) (map[string]int32, error) {
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	held := map[string]int32{}
	timeout := time.After(wait)
	for {
		select {
		case <-timeout:
			return nil, fmt.Errorf("the child consumer acquired nothing in %v", wait)
		case l, ok := <-lines:
			if !ok {
				return nil, fmt.Errorf("the child consumer ended before holding records")
			}
			logf("share_member_kill: child: %s", l)
			f := strings.Fields(l)
			switch {
			case len(f) == 5 && f[0] == "record":
				dc, _ := strconv.Atoi(f[3])
				held[f[4]] = int32(dc)
			case len(f) > 0 && f[0] == "held" && len(held) > 0:
				return held, nil
			default:
				return nil, fmt.Errorf("the child consumer: %s", l)
			}
		}
	}
}

// afterKill is how long after the kill the consumer started after it got its first record, and
// its first held one (-1: never).
type afterKill struct{ firstAny, firstHeldBack time.Duration }

// readAfterKill: a consumer started after the kill accepts everything it gets until every
// record is accepted, then polls a quiet round.
func readAfterKill(ctx context.Context, group, topic string, l *ledger, values []string, held map[string]int32,
	killedAt time.Time) (afterKill, error) {
	back := afterKill{-1, -1}
	c, err := newMember(group, topic, "after-kill")
	if err != nil {
		return back, err
	}
	defer c.close()
	deadline := killedAt.Add(minLockMs*time.Millisecond + wait)
	for !l.allAccepted(values) {
		if time.Now().After(deadline) {
			return back, fmt.Errorf("after the kill the other consumer got %d of %d (held by the killed one: %v; deliveries %v)",
				l.distinct(), len(values), held, l)
		}
		rs, err := c.pollAck(ctx, l, 0, accept)
		if err != nil {
			return back, err
		}
		for _, r := range rs {
			if back.firstAny < 0 {
				back.firstAny = time.Since(killedAt)
			}
			if _, ok := held[string(r.Value)]; ok && back.firstHeldBack < 0 {
				back.firstHeldBack = time.Since(killedAt)
			}
		}
	}
	for end := time.Now().Add(quiet); time.Now().Before(end); {
		if _, err := c.pollAck(ctx, l, 0, accept); err != nil {
			return back, err
		}
	}
	return back, nil
}

func checkAfterKill(ctx context.Context, group, topic string, l *ledger, values []string, held map[string]int32,
	back afterKill) (string, error) {
	if f := l.failures(); len(f) > 0 {
		return "", fmt.Errorf("accepts failed: %v", f)
	}
	if a := l.afterFinals(); len(a) > 0 {
		return "", fmt.Errorf("delivered again after an accept: %v", a)
	}
	var wrong []string
	heldCounts := map[int32]int{}
	prefetched := 0
	for _, v := range values {
		d := l.of(v)
		_, wasHeld := held[v]
		// A record the child's client fetched ahead (acquired, never handed to the child before
		// the kill) would come back with count 2 too. Never above 2 for those.
		ok := len(d) == 1 && l.confirmedCount(v, kgo.AckAccept) == 1 && (wasHeld && d[0] >= 2 || !wasHeld && (d[0] == 1 || d[0] == 2))
		if !ok {
			wrong = append(wrong, fmt.Sprintf("%s (held %v) %v", v, wasHeld, d))
		}
		if wasHeld && len(d) > 0 {
			heldCounts[d[0]]++
		}
		if !wasHeld && len(d) == 1 && d[0] == 2 {
			prefetched++
		}
	}
	if len(wrong) > 0 {
		return "", fmt.Errorf("not delivered once more and accepted as expected (held ones: delivery count >= 2, the rest 1, "+
			"or 2 if fetched ahead by the child): %v", wrong)
	}
	offsets, err := checkAllAcknowledged(ctx, group, topic, 1, 15*time.Second)
	if err != nil {
		return "", err
	}
	backMs, anyMs := back.firstHeldBack.Milliseconds(), back.firstAny.Milliseconds()
	heldValues := make([]string, 0, len(held))
	for v := range held {
		heldValues = append(heldValues, v)
	}
	sort.Strings(heldValues)
	logf("share_member_kill: held %v, back after %d ms (the other consumer's first record after %d ms) with delivery counts %v",
		heldValues, backMs, anyMs, heldCounts)
	return fmt.Sprintf("the killed child held %d of %d; the other consumer (started after the kill) got them back %d ms after "+
		"the kill -9 (its first record of any after %d ms; lock %d ms) with delivery counts (count:records) %v, the other %d "+
		"with 1 and %d fetched ahead by the child with 2; each accepted exactly once; offsets %s", len(held), len(values),
		backMs, anyMs, minLockMs, heldCounts, len(values)-len(held)-prefetched, prefetched, offsets), nil
}
