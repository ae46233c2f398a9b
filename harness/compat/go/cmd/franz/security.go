// franz-go's connection security (kgo.DialTLSConfig, kgo.SASL with sasl/scram or sasl/plain)
// from the environment (compat/security.go), and the security suite's scenarios
// (COMPAT_SUITE=security, scripts/security-accept.sh).

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
	saslplain "github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"onelog/compat/compat"
)

// securityOpts are the client options of the environment's security, with that SASL password;
// clientCert=false leaves the TLS client certificate out.
func securityOpts(password string, clientCert bool) []kgo.Opt {
	var opts []kgo.Opt
	cfg, err := compat.TLSConfig(clientCert)
	if err != nil {
		panic(err)
	}
	if cfg != nil {
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if compat.SASL {
		switch compat.SASLMechanism {
		case "PLAIN":
			opts = append(opts, kgo.SASL(saslplain.Auth{User: compat.SASLUsername, Pass: password}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: compat.SASLUsername, Pass: password}.AsSha256Mechanism()))
		default:
			opts = append(opts, kgo.SASL(scram.Auth{User: compat.SASLUsername, Pass: password}.AsSha512Mechanism()))
		}
	}
	return opts
}

func tagged(rs []*kgo.Record, tag string) []string {
	var out []string
	for _, r := range rs {
		if strings.HasPrefix(string(r.Value), tag) {
			out = append(out, string(r.Value))
		}
	}
	return out
}

// secRead is every value of the shared topic starting with tag, read from the start until the
// high watermark seen first (a committed transaction's marker may be its last offset).
func secRead(ctx context.Context, tag string, isolation kgo.IsolationLevel) ([]string, error) {
	cl := newClient(kgo.FetchIsolationLevel(isolation),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{compat.SecTopic: {0: kgo.NewOffset().AtStart()}}))
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, compat.SecTopic)
	if err != nil {
		return nil, err
	}
	end, _ := ends.Lookup(compat.SecTopic, 0)
	if end.Err != nil {
		return nil, end.Err
	}
	var out []*kgo.Record
	last := int64(-1)
	var quiet time.Time
	for {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) && !errors.Is(e.Err, context.Canceled) {
				return nil, fmt.Errorf("fetch %s[%d]: %w", e.Topic, e.Partition, e.Err)
			}
		}
		for _, r := range fs.Records() {
			out = append(out, r)
			last = r.Offset
		}
		if quiet.IsZero() && last >= end.Offset-2 {
			quiet = time.Now().Add(time.Second)
		}
		if end.Offset == 0 || (!quiet.IsZero() && time.Now().After(quiet)) {
			return tagged(out, tag), nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read up to offset %d of %d: %w", last, end.Offset, ctx.Err())
		}
	}
}

// plainBatches: the shared topic is read by kafkajs, which has no snappy codec (franz-go's default).
var plainBatches = kgo.ProducerBatchCompression(kgo.NoCompression())

func values(tag string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", tag, i)
	}
	return out
}

func valueRecords(vs []string) []*kgo.Record {
	out := make([]*kgo.Record, len(vs))
	for i, v := range vs {
		out[i] = &kgo.Record{Topic: compat.SecTopic, Partition: 0, Value: []byte(v)}
	}
	return out
}

func secProduceConsume(ctx context.Context) (string, error) {
	tag := compat.Prefix + "-pc-"
	want := values(tag, 5)
	p := newClient(plainBatches)
	err := p.ProduceSync(ctx, valueRecords(want)...).FirstErr()
	p.Close()
	if err != nil {
		return "", err
	}
	group := name("g", "")
	cl := newClient(kgo.ConsumerGroup(group), kgo.ConsumeTopics(compat.SecTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	defer cl.Close()
	var got []string
	for len(got) < len(want) {
		if ctx.Err() != nil {
			return "", fmt.Errorf("group consumer read %v: %w", got, ctx.Err())
		}
		fs := cl.PollFetches(ctx)
		for _, e := range fs.Errors() {
			return "", fmt.Errorf("fetch %s[%d]: %w", e.Topic, e.Partition, e.Err)
		}
		got = append(got, tagged(fs.Records(), tag)...)
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		return "", err
	}
	return "5 records produced and read back through group " + group + ", offsets committed",
		compat.Check("records read through the group", got, want)
}

func secTxnAllowed(ctx context.Context) (string, error) {
	tag := compat.Prefix + "-txa-"
	want := values(tag, 3)
	cl := newClient(kgo.TransactionalID(compat.SecTxnAllowed), plainBatches)
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		return "", err
	}
	if err := cl.ProduceSync(ctx, valueRecords(want)...).FirstErr(); err != nil {
		return "", err
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return "", err
	}
	got, err := secRead(ctx, tag, kgo.ReadCommitted())
	if err != nil {
		return "", err
	}
	return "transaction with " + compat.SecTxnAllowed + " committed; read_committed reads its 3 records",
		compat.Check("read_committed", got, want)
}

func secTxnDenied(ctx context.Context) (string, error) {
	tag := compat.Prefix + "-txb-"
	cl := newClient(kgo.TransactionalID(compat.SecTxnDenied), plainBatches)
	defer cl.Close()
	err := cl.BeginTransaction()
	if err == nil {
		// kgo asks for the producer id with the first record.
		err = cl.ProduceSync(ctx, valueRecords(values(tag, 3))...).FirstErr()
	}
	if err == nil {
		err = cl.EndTransaction(ctx, kgo.TryCommit)
	}
	if err == nil {
		return "", fmt.Errorf("the transaction with %s committed", compat.SecTxnDenied)
	}
	if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		return "", fmt.Errorf("want TRANSACTIONAL_ID_AUTHORIZATION_FAILED, got %w", err)
	}
	got, rerr := secRead(ctx, tag, kgo.ReadUncommitted())
	if rerr != nil {
		return "", rerr
	}
	return fmt.Sprintf("produce with %s: %v; read_uncommitted sees none of it", compat.SecTxnDenied, err),
		compat.Check("records of the denied transaction under read_uncommitted", len(got), 0)
}

func secBadCredentials(ctx context.Context) (string, error) {
	var opts []kgo.Opt
	var what string
	switch {
	case compat.SASL:
		opts, what = securityOpts("not-the-password", true), "a wrong SASL password"
	case compat.TLS:
		opts, what = securityOpts("", false), "no client certificate"
	default:
		return "", compat.NotExpressible{Reason: "PLAINTEXT has no credentials"}
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(compat.Bootstrap...))...)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	mctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err = kadm.NewClient(cl).Metadata(mctx)
	if err == nil {
		return "", fmt.Errorf("metadata with %s succeeded", what)
	}
	if errors.Is(err, kerr.SaslAuthenticationFailed) || strings.Contains(err.Error(), "tls:") {
		return what + ": " + err.Error(), nil
	}
	return "", fmt.Errorf("want an authentication or TLS error, got %w", err)
}
