// The ledger of a share scenario (ShareKit.Ledger of the JVM driver): every delivery of every
// record (by value) with its delivery count, and every acknowledgement's outcome as the broker
// reported it through the acknowledgement callback.

package main

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

type ledger struct {
	mu sync.Mutex
	// deliveries: value -> the delivery counts it arrived with, in order.
	deliveries map[string][]int32
	// confirmed: value -> how many acknowledgements of each type the broker confirmed.
	confirmed map[string]map[kgo.AckStatus]int
	// failed: value -> the error of each acknowledgement reported failed.
	failed map[string][]string
	// afterFinal: deliveries of a record after its ACCEPT or REJECT was confirmed (never allowed).
	afterFinal []string
	// where: value -> partition@offset.
	where map[string]string
}

func newLedger() *ledger {
	return &ledger{deliveries: map[string][]int32{}, confirmed: map[string]map[kgo.AckStatus]int{},
		failed: map[string][]string{}, where: map[string]string{}}
}

func (l *ledger) delivered(r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := string(r.Value)
	if l.finalizedLocked(v) {
		l.afterFinal = append(l.afterFinal, fmt.Sprintf("%s (delivery count %d)", v, r.DeliveryCount()))
	}
	l.deliveries[v] = append(l.deliveries[v], r.DeliveryCount())
	l.where[v] = fmt.Sprintf("%d@%d", r.Partition, r.Offset)
}

func (l *ledger) finalizedLocked(v string) bool {
	return l.confirmed[v][kgo.AckAccept] > 0 || l.confirmed[v][kgo.AckReject] > 0
}

func (l *ledger) outcome(v string, t kgo.AckStatus, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failed[v] = append(l.failed[v], fmt.Sprintf("%s: %v", t, err))
		return
	}
	if l.confirmed[v] == nil {
		l.confirmed[v] = map[kgo.AckStatus]int{}
	}
	l.confirmed[v][t]++
}

func (l *ledger) confirmedCount(v string, t kgo.AckStatus) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.confirmed[v][t]
}

// whereOf answers where `v` was last delivered (partition@offset).
func (l *ledger) whereOf(v string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.where[v]
}

// of answers the delivery counts `v` arrived with.
func (l *ledger) of(v string) []int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int32(nil), l.deliveries[v]...)
}

func (l *ledger) distinct() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.deliveries)
}

func (l *ledger) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, d := range l.deliveries {
		n += len(d)
	}
	return n
}

// acceptedDistinct counts the records with a confirmed ACCEPT.
func (l *ledger) acceptedDistinct() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.confirmed {
		if c[kgo.AckAccept] > 0 {
			n++
		}
	}
	return n
}

// allAccepted: every value has a confirmed ACCEPT.
func (l *ledger) allAccepted(values []string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range values {
		if l.confirmed[v][kgo.AckAccept] == 0 {
			return false
		}
	}
	return true
}

func (l *ledger) failures() map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]string{}
	for v, f := range l.failed {
		out[v] = append([]string(nil), f...)
	}
	return out
}

func (l *ledger) afterFinals() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.afterFinal...)
}

// String is the deliveries, sorted by value, for a failure's detail.
func (l *ledger) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := make([]string, 0, len(l.deliveries))
	for v := range l.deliveries {
		keys = append(keys, v)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, v := range keys {
		parts[i] = fmt.Sprintf("%s=%v", v, l.deliveries[v])
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// sample is "3 (e.g. a, b, c)" for a detail.
func sample(values []string) string {
	if len(values) == 0 {
		return "none"
	}
	sorted := append([]string(nil), values...)
	sort.Strings(sorted)
	return fmt.Sprintf("%d (e.g. %s)", len(values), strings.Join(sorted[:min(3, len(sorted))], ", "))
}
